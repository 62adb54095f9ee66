"""A fake Bot API server on 127.0.0.1 for the offline demo (real HTTP, one token).

`tgbot demo` drives the real bot through it: aiogram's HTTP client polls `getUpdates` and
sends replies, chat actions, drafts, reactions and deletions, which it answers as Telegram
would. The tests' fake (`testkit.fake_bot_api.FakeBotApi`, not shipped) extends it with the
rest of the Bot API the bot calls, fault injection and waits.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any, Self

from aiohttp import web

from adapters.telegram.text_units import utf16_len

JSON = dict[str, Any]
Params = dict[str, Any]
Handler = Callable[[Params], Awaitable[Any]]

# Fields that are strings on the wire even when they look like JSON ("123", "true").
_STRING_FIELDS = frozenset(
    {"text", "caption", "emoji", "action", "url", "secret_token", "parse_mode", "description"}
) | {"file_id"}
_UPDATE_KINDS = (
    "message", "edited_message", "channel_post", "edited_channel_post", "callback_query",
    "inline_query", "my_chat_member", "chat_member", "poll", "poll_answer",
    "message_reaction", "chat_join_request",
)  # fmt: skip
_MENTION = r"@[A-Za-z][A-Za-z0-9_]{3,31}"


class ApiError(Exception):
    """A Bot API error answer (`ok: false`) raised by a method handler."""

    def __init__(self, code: int, description: str) -> None:
        super().__init__(description)
        self.code = code
        self.description = description


class DemoBotApi:
    """Behaves like the Bot API for one token, for the methods the demo's bot calls.

    Start it, point `build_bot` at `base_url`, push updates with `push_update` (build them
    with `user_message`) and read what the bot sent with `sent_messages(chat_id)`.
    """

    def __init__(
        self,
        token: str,
        *,
        bot_id: int | None = None,
        username: str = "test_bot",
        first_name: str = "Test Bot",
    ) -> None:
        self.token = token
        self.bot_id = bot_id if bot_id is not None else int(token.split(":", 1)[0])
        self.username = username
        self.first_name = first_name
        self.deleted: list[tuple[int, int]] = []
        self.reactions: list[tuple[int, int, tuple[str, ...]]] = []
        self._updates: list[JSON] = []
        self._next_update_id = 1
        self._messages: dict[tuple[int, int], JSON] = {}
        self._sent: dict[int, list[JSON]] = {}
        self._chats: dict[int, JSON] = {}
        self._next_message_id: dict[int, int] = {}
        self._pushed = asyncio.Event()
        self._closing = False
        self._runner: web.AppRunner | None = None
        self._port = 0
        self._handlers: dict[str, Handler] = {
            "getme": self._get_me,
            "getupdates": self._get_updates,
            "sendmessage": self._send_message,
            "deletemessage": self._delete_message,
            "setmessagereaction": self._set_message_reaction,
            "sendchataction": self._send_chat_action,
            "sendmessagedraft": self._send_message_draft,
        }

    # ------------------------------------------------------------ lifecycle

    @property
    def base_url(self) -> str:
        if not self._port:
            raise RuntimeError("the fake Bot API is not started")
        return f"http://127.0.0.1:{self._port}"

    @property
    def bot_user(self) -> JSON:
        return {
            "id": self.bot_id,
            "is_bot": True,
            "first_name": self.first_name,
            "username": self.username,
        }

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/bot{token}/{method}", self._dispatch)
        self._add_routes(app)
        self._closing = False
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        """Wake every long poll, then close the server."""
        self._closing = True
        self._wake()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ------------------------------------------------------------ updates in, messages out

    def push_update(self, update: Mapping[str, Any], *, update_id: int | None = None) -> int:
        """Queue an update for getUpdates; assigns and returns its `update_id`.

        An explicit `update_id` is kept as given (to queue updates out of order: getUpdates
        returns them in the order they were pushed). The update is served as given, never
        checked: tests poison a batch with shapes aiogram cannot validate."""
        data = dict(update)
        if update_id is None:
            update_id = self._next_update_id
        data["update_id"] = update_id
        self._next_update_id = max(self._next_update_id, update_id + 1)
        for kind in ("message", "edited_message", "channel_post"):
            if isinstance(data.get(kind), dict):
                self._remember(data[kind])
        self._updates.append(data)
        self._wake()
        return int(data["update_id"])

    def user_message(
        self,
        chat_id: int,
        user: Mapping[str, Any] | int,
        text: str,
        *,
        reply_to: int | None = None,
        quote: str | None = None,
        date: int | datetime | None = None,
        chat_type: str = "supergroup",
        chat_title: str | None = None,
        thread_id: int | None = None,
        message_id: int | None = None,
        edit: bool = False,
    ) -> JSON:
        """A realistic update dict for a user's text message, recorded as a message in the chat.

        Entities for @mentions and a leading /command are computed as Telegram would. With
        `thread_id` the message is a forum-topic message and carries the implicit reply to the
        topic's first message; `quote` is the selected part of the replied-to message.
        `edit=True` gives an `edited_message` update for an existing `message_id`.
        """
        sender = user_json(user)
        chat = self._chat(chat_id, chat_type, chat_title, sender)
        when = _unix(date) if date is not None else int(time.time())
        mid = message_id if message_id is not None else self._new_message_id(chat_id)
        msg: JSON = {"message_id": mid, "from": sender, "chat": chat, "date": when, "text": text}
        if entities := _entities(text):
            msg["entities"] = entities
        if thread_id is not None:
            msg["message_thread_id"] = thread_id
            msg["is_topic_message"] = True
        target = reply_to if reply_to is not None else thread_id
        if target is not None:
            msg["reply_to_message"] = self._reply_target(chat, target, topic=reply_to is None)
        if quote is not None and reply_to is not None:
            whole = str(msg["reply_to_message"].get("text", ""))
            msg["quote"] = {"text": quote, "position": max(whole.find(quote), 0), "is_manual": True}
        if edit:
            msg["edit_date"] = int(time.time())
            return {"edited_message": msg}
        self._remember(msg)
        return {"message": msg}

    def sent_messages(self, chat_id: int) -> list[JSON]:
        """Messages the bot sent to `chat_id`, in order (edits applied, deletions kept)."""
        return list(self._sent.get(chat_id, []))

    # ------------------------------------------------------------ HTTP

    def _add_routes(self, app: web.Application) -> None:
        """More routes than the methods (the test kit's file downloads)."""

    async def _dispatch(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return error_response(401, "Unauthorized")
        name = request.match_info["method"]
        handler = self._handlers.get(name.lower())
        params = await read_params(request)
        await self._record(name, params)
        if handler is None:
            return error_response(404, "Not Found")
        held = await self._hold(name)
        if held is not None:
            return held
        try:
            result = await handler(params)
        except ApiError as exc:
            return error_response(exc.code, exc.description)
        return web.json_response({"ok": True, "result": result})

    async def _record(self, name: str, params: Params) -> None:
        """Every call, as it arrives (the test kit records them)."""

    async def _hold(self, name: str) -> web.Response | None:
        """Before a call is handled: an answer that replaces it (the test kit's injected
        failures and delays); None handles it."""
        return None

    def _wake(self) -> None:
        self._pushed.set()
        self._pushed = asyncio.Event()

    # ------------------------------------------------------------ methods

    async def _get_me(self, params: Params) -> JSON:
        return {
            **self.bot_user,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }

    async def _get_updates(self, params: Params) -> list[JSON]:
        offset = int_param(params.get("offset"), 0)
        limit = min(max(int_param(params.get("limit"), 100), 1), 100)
        timeout = max(int_param(params.get("timeout"), 0), 0)
        allowed = params.get("allowed_updates") or None
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            if offset:
                self._updates = [u for u in self._updates if u["update_id"] >= offset]
            if allowed:
                self._updates = [u for u in self._updates if _kind(u) in allowed]
            if self._updates or self._closing:
                return self._updates[:limit]
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                return []
            pushed = self._pushed
            try:
                await asyncio.wait_for(pushed.wait(), left)
            except TimeoutError:
                return []

    async def _send_message(self, params: Params) -> JSON:
        chat_id = self._chat_id(params)
        text = params.get("text")
        if not isinstance(text, str) or not text.strip():
            raise ApiError(400, "Bad Request: message text is empty")
        if utf16_len(text) > 4096:
            raise ApiError(400, "Bad Request: message is too long")
        entities = params.get("entities")
        if entities:
            check_entities(text, entities)
        msg = self._outgoing(chat_id, params)
        msg["text"] = text
        if entities:
            msg["entities"] = entities
        return self._store_sent(msg)

    async def _delete_message(self, params: Params) -> bool:
        chat_id = self._chat_id(params)
        msg = self._existing(chat_id, params, "message to delete not found")
        del self._messages[(chat_id, int(msg["message_id"]))]
        self.deleted.append((chat_id, int(msg["message_id"])))
        return True

    async def _set_message_reaction(self, params: Params) -> bool:
        chat_id = self._chat_id(params)
        msg = self._existing(chat_id, params, "message to react not found")
        raw = params.get("reaction") or []
        emojis = tuple(
            str(r.get("emoji", "")) for r in raw if isinstance(r, dict) and r.get("type") == "emoji"
        )
        self.reactions.append((chat_id, int(msg["message_id"]), emojis))
        return True

    async def _send_chat_action(self, params: Params) -> bool:
        self._chat_id(params)
        if not params.get("action"):
            raise ApiError(400, "Bad Request: wrong parameter action in request")
        return True

    async def _send_message_draft(self, params: Params) -> bool:
        """`sendMessageDraft` (Bot API 9.3): a private chat's reply shown as it is written;
        `draft_id` must be non-zero, `text` 1-4096 characters."""
        self._chat_id(params)
        if not int_param(params.get("draft_id"), 0):
            raise ApiError(400, "Bad Request: draft_id must be non-zero")
        text = str(params.get("text", ""))
        if not text:
            raise ApiError(400, "Bad Request: text must be non-empty")
        return True

    # ------------------------------------------------------------ chat state

    def _chat_id(self, params: Params) -> int:
        chat_id = params.get("chat_id")
        if isinstance(chat_id, bool) or not isinstance(chat_id, int):
            raise ApiError(400, "Bad Request: chat not found")
        return chat_id

    def _existing(self, chat_id: int, params: Params, missing: str) -> JSON:
        message_id = int_param(params.get("message_id"), 0)
        msg = self._messages.get((chat_id, message_id))
        if msg is None:
            raise ApiError(400, f"Bad Request: {missing}")
        return msg

    def _chat(
        self, chat_id: int, chat_type: str, title: str | None, user: JSON | None = None
    ) -> JSON:
        known = self._chats.get(chat_id)
        if known is not None and title is None:
            return known
        if chat_id > 0:
            chat: JSON = {"id": chat_id, "type": "private"}
            chat["first_name"] = (user or {}).get("first_name", f"User {chat_id}")
        else:
            chat = {"id": chat_id, "type": chat_type, "title": title or f"Chat {chat_id}"}
        self._chats[chat_id] = chat
        return chat

    def _new_message_id(self, chat_id: int) -> int:
        next_id = self._next_message_id.get(chat_id, 1)
        self._next_message_id[chat_id] = next_id + 1
        return next_id

    def _remember(self, msg: JSON) -> None:
        chat = msg.get("chat")
        if not isinstance(chat, dict) or not isinstance(msg.get("message_id"), int):
            return
        chat_id = int(chat["id"])
        self._chats.setdefault(chat_id, chat)
        self._messages[(chat_id, int(msg["message_id"]))] = msg
        if msg["message_id"] >= self._next_message_id.get(chat_id, 1):
            self._next_message_id[chat_id] = int(msg["message_id"]) + 1

    def _reply_target(self, chat: JSON, message_id: int, *, topic: bool) -> JSON:
        known = self._messages.get((int(chat["id"]), message_id))
        if known is not None:
            return {k: v for k, v in known.items() if k != "reply_to_message"}
        if topic:  # the implicit reply of a forum-topic message: the topic's first message
            return {
                "message_id": message_id,
                "chat": chat,
                "date": int(time.time()),
                "message_thread_id": message_id,
                "is_topic_message": True,
                "forum_topic_created": {"name": f"Topic {message_id}", "icon_color": 7322096},
            }
        return {"message_id": message_id, "chat": chat, "date": int(time.time())}

    def _outgoing(self, chat_id: int, params: Params) -> JSON:
        chat = self._chats.get(chat_id) or self._chat(
            chat_id, "private" if chat_id > 0 else "supergroup", None
        )
        msg: JSON = {
            "message_id": self._new_message_id(chat_id),
            "from": self.bot_user,
            "chat": chat,
            "date": int(time.time()),
        }
        thread_id = int_param(params.get("message_thread_id"), 0)
        if thread_id:
            msg["message_thread_id"] = thread_id
            msg["is_topic_message"] = True
        reply = params.get("reply_parameters")
        reply_id = int_param(reply.get("message_id"), 0) if isinstance(reply, dict) else 0
        allow_without = bool(isinstance(reply, dict) and reply.get("allow_sending_without_reply"))
        reply_id = reply_id or int_param(params.get("reply_to_message_id"), 0)
        if reply_id:
            target = self._messages.get((chat_id, reply_id))
            if target is not None:
                msg["reply_to_message"] = {
                    k: v for k, v in target.items() if k != "reply_to_message"
                }
            elif not (allow_without or params.get("allow_sending_without_reply") is True):
                raise ApiError(400, "Bad Request: message to be replied not found")
        return msg

    def _store_sent(self, msg: JSON) -> JSON:
        chat_id = int(msg["chat"]["id"])
        self._remember(msg)
        self._sent.setdefault(chat_id, []).append(msg)
        return msg


# ---------------------------------------------------------------- wire helpers


async def read_params(request: web.Request) -> Params:
    params: Params = {k: _decode(k, v) for k, v in request.query.items()}
    if request.content_type == "application/json":
        body = await request.json()
        if isinstance(body, dict):
            params.update(body)
    elif request.can_read_body:
        form = await request.post()
        for key, value in form.items():
            if isinstance(value, web.FileField):
                params[key] = value.file.read()
            else:
                params[key] = _decode(key, str(value))
    return params


def _decode(key: str, value: str) -> Any:
    """Form fields carry JSON for numbers, booleans and objects; strings stay strings."""
    if key in _STRING_FIELDS:
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def error_response(code: int, description: str, parameters: JSON | None = None) -> web.Response:
    body: JSON = {"ok": False, "error_code": code, "description": description}
    if parameters:
        body["parameters"] = parameters
    return web.json_response(body, status=code)


def int_param(value: Any, default: int) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return default
    return default


def _unix(value: int | datetime) -> int:
    return value if isinstance(value, int) else int(value.timestamp())


def _kind(update: JSON) -> str:
    return next((k for k in _UPDATE_KINDS if k in update), "")


def user_json(user: Mapping[str, Any] | int) -> JSON:
    if isinstance(user, int):
        return {"id": user, "is_bot": False, "first_name": f"User{user}"}
    data = dict(user)
    data.setdefault("is_bot", False)
    data.setdefault("first_name", f"User{data['id']}")
    return data


_ENTITY_TYPES = frozenset(
    {"mention", "hashtag", "cashtag", "bot_command", "url", "email", "phone_number", "bold",
     "italic", "underline", "strikethrough", "spoiler", "blockquote", "expandable_blockquote",
     "code", "pre", "text_link", "text_mention", "custom_emoji"}
)  # fmt: skip


def check_entities(text: str, entities: Any) -> None:
    """Entities must be a list of known types inside the text (UTF-16 units), as Telegram
    demands; a text_link needs its url."""
    size = utf16_len(text)
    problem = ""
    if not isinstance(entities, list):
        problem = "entities must be an array"
    for entity in entities if isinstance(entities, list) else []:
        offset = entity.get("offset") if isinstance(entity, dict) else None
        length = entity.get("length") if isinstance(entity, dict) else None
        if not isinstance(entity, dict) or entity.get("type") not in _ENTITY_TYPES:
            problem = f"unsupported entity {entity!r}"
        elif not isinstance(offset, int) or not isinstance(length, int):
            problem = "entity offset and length must be integers"
        elif offset < 0 or length <= 0 or offset + length > size:
            problem = f"entity at offset {offset} with length {length} is outside the text"
        elif entity["type"] == "text_link" and not entity.get("url"):
            problem = "text_link without url"
        if problem:
            break
    if problem:
        raise ApiError(400, f"Bad Request: can't parse entities: {problem}")


def _entities(text: str) -> list[JSON]:
    """Mentions and a leading bot command, with UTF-16 offsets, as Telegram computes them."""
    found: list[JSON] = []
    command = re.match(r"/[A-Za-z0-9_]{1,32}(?:@[A-Za-z][A-Za-z0-9_]{3,31})?", text)
    if command:
        found.append({"offset": 0, "length": utf16_len(command.group()), "type": "bot_command"})
    for match in re.finditer(rf"(?<![\w@]){_MENTION}", text):
        if command and match.start() < command.end():
            continue
        offset = utf16_len(text[: match.start()])
        found.append({"offset": offset, "length": utf16_len(match.group()), "type": "mention"})
    return found

"""A fake Bot API server on 127.0.0.1 for tests and the offline demo (real HTTP, one token)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aiogram.types import ChatMemberAdministrator, ChatMemberRestricted
from aiohttp import web
from pydantic import BaseModel

from adapters.telegram.text_units import utf16_len

JSON = dict[str, Any]
Params = dict[str, Any]

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


@dataclass
class _Failure:
    error_code: int
    description: str
    retry_after: int | None
    times: int
    after: int


@dataclass
class _File:
    data: bytes
    unique_id: str
    path: str
    declared_size: int | None


@dataclass
class _Delay:
    seconds: float
    times: int
    after: int


class _ApiError(Exception):
    def __init__(self, code: int, description: str) -> None:
        super().__init__(description)
        self.code = code
        self.description = description


class FakeBotApi:
    """Behaves like the Bot API for one token; records every call for assertions.

    Start it, point `TELEGRAM_API_BASE` (or `build_bot`) at `base_url`, push updates with
    `push_update` (build them with `user_message`), and assert on `calls`,
    `sent_messages(chat_id)`, `deleted` and `reactions`. `fail_next` injects Bot API errors,
    `delay_next` slow or hanging calls.
    """

    def __init__(
        self,
        token: str = "123456:TEST-token",
        *,
        bot_id: int | None = None,
        username: str = "test_bot",
        first_name: str = "Test Bot",
        reads_all_group_messages: bool = False,
    ) -> None:
        self.token = token
        self.reads_all_group_messages = reads_all_group_messages
        """getMe's `can_read_all_group_messages`: privacy mode off (BotFather's setting)."""
        self.bot_id = bot_id if bot_id is not None else int(token.split(":", 1)[0])
        self.username = username
        self.first_name = first_name
        self.calls: list[tuple[str, Params]] = []
        self.call_times: list[float] = []
        """`time.monotonic()` when each of `calls` arrived (same index): order and spacing
        of chat actions, drafts and replies."""
        self._calls_by_method: dict[str, list[Params]] = {}
        """`calls` by lower-cased method name (a busy load test waits on these counts)."""
        self.deleted: list[tuple[int, int]] = []
        self.reactions: list[tuple[int, int, tuple[str, ...]]] = []
        self.photos: list[tuple[int, bytes]] = []
        self.commands: list[JSON] = []
        self.webhook_url = ""
        self._updates: list[JSON] = []
        self._next_update_id = 1
        self._messages: dict[tuple[int, int], JSON] = {}
        self._sent: dict[int, list[JSON]] = {}
        self._chats: dict[int, JSON] = {}
        self._admins: dict[int, set[int]] = {}
        self._creators: dict[int, int] = {}
        self._next_message_id: dict[int, int] = {}
        self._failures: dict[str, list[_Failure]] = {}
        self._delays: dict[str, list[_Delay]] = {}
        self._entity_rejections = 0
        self._files: dict[str, _File] = {}
        self.downloads: list[str] = []
        """The file paths downloaded through `/file/bot<token>/<path>`, in order."""
        self._sent_waiters: dict[int, list[tuple[int, asyncio.Future[None]]]] = {}
        self._pushed = asyncio.Event()
        self._called: asyncio.Condition | None = None
        self._stopped: asyncio.Event | None = None
        self._closing = False
        self._runner: web.AppRunner | None = None
        self._port = 0
        self._handlers: dict[str, Callable[[Params], Awaitable[Any]]] = {
            "getme": self._get_me,
            "getupdates": self._get_updates,
            "sendmessage": self._send_message,
            "editmessagetext": self._edit_message_text,
            "deletemessage": self._delete_message,
            "setmessagereaction": self._set_message_reaction,
            "getchatmember": self._get_chat_member,
            "sendphoto": self._send_photo,
            "sendchataction": self._send_chat_action,
            "sendmessagedraft": self._send_message_draft,
            "setwebhook": self._set_webhook,
            "deletewebhook": self._delete_webhook,
            "getwebhookinfo": self._get_webhook_info,
            "getchat": self._get_chat,
            "setmycommands": self._set_my_commands,
            "getmycommands": self._get_my_commands,
            "getfile": self._get_file,
            "deletemycommands": self._true,
            "close": self._true,
            "logout": self._true,
        }
        self._direct_messages_setup()

    # ------------------------------------------------------------ lifecycle

    @property
    def base_url(self) -> str:
        if not self._port:
            raise RuntimeError("FakeBotApi is not started")
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
        app.router.add_route("GET", "/file/bot{token}/{path:.+}", self._download)
        self._called = asyncio.Condition()
        self._stopped = asyncio.Event()
        self._closing = False
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        """Wake every long poll, then close the server."""
        self._closing = True
        if self._stopped is not None:
            self._stopped.set()
        self._wake()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeBotApi:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ------------------------------------------------------------ test controls

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
        sender = _user_json(user)
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

    def add_file(
        self,
        file_id: str,
        data: bytes,
        *,
        unique_id: str | None = None,
        path: str | None = None,
        declared_size: int | None = None,
    ) -> None:
        """Serve `data` as `file_id` (`getFile`, then `/file/bot<token>/<path>`).
        `declared_size` is what `getFile` reports (default: the real size)."""
        self._files[file_id] = _File(
            data=data,
            unique_id=unique_id or f"u{len(self._files) + 1}",
            path=path or f"files/{file_id}",
            declared_size=declared_size,
        )

    def media_message(
        self,
        chat_id: int,
        user: Mapping[str, Any] | int,
        caption: str,
        *,
        kind: str,
        data: bytes,
        file_id: str,
        width: int = 0,
        height: int = 0,
        mime_type: str | None = None,
        file_name: str | None = None,
        duration: int = 0,
        declared_size: int | None = None,
        reply_to: int | None = None,
        message_id: int | None = None,
    ) -> JSON:
        """A message carrying a file (`kind`: photo, document, sticker, voice, video_note)
        with `caption`, the file served by `getFile` and its download URL."""
        update = self.user_message(chat_id, user, caption, reply_to=reply_to, message_id=message_id)
        msg = update["message"]
        text = msg.pop("text")
        entities = msg.pop("entities", None)
        if text:
            msg["caption"] = text
            if entities:
                msg["caption_entities"] = entities
        unique = f"{file_id}-u"
        self.add_file(file_id, data, unique_id=unique, declared_size=declared_size)
        size = declared_size if declared_size is not None else len(data)
        file: JSON = {"file_id": file_id, "file_unique_id": unique, "file_size": size}
        if kind == "photo":
            msg["photo"] = [{**file, "width": width, "height": height}]
        elif kind == "sticker":
            msg["sticker"] = {
                **file, "width": width, "height": height, "type": "regular",
                "is_animated": False, "is_video": False, "emoji": "🙂",
            }  # fmt: skip
        elif kind in ("voice", "video_note"):
            extra = {"mime_type": mime_type or "audio/ogg"} if kind == "voice" else {"length": 240}
            msg[kind] = {**file, "duration": duration, **extra}
        else:
            msg["document"] = {**file, "file_name": file_name or file_id}
            if mime_type:
                msg["document"]["mime_type"] = mime_type
        self._remember(msg)
        return update

    def set_admins(self, chat_id: int, user_ids: set[int], *, creator: int | None = None) -> None:
        """Who `getChatMember` says administers `chat_id` (and its creator, if any)."""
        self._admins[chat_id] = set(user_ids)
        if creator is not None:
            self._creators[chat_id] = creator

    def member_update(
        self,
        chat_id: int,
        actor: Mapping[str, Any] | int,
        *,
        old: str = "left",
        new: str = "member",
        chat_type: str = "supergroup",
        chat_title: str | None = None,
    ) -> JSON:
        """A `my_chat_member` update: `actor` changed the bot's status in the chat from `old`
        to `new` ("left" → "member" adds it, "member" → "kicked" removes it)."""
        sender = _user_json(actor)
        chat = self._chat(chat_id, chat_type, chat_title, sender)
        return {
            "my_chat_member": {
                "chat": chat,
                "from": sender,
                "date": int(time.time()),
                "old_chat_member": self._member(old),
                "new_chat_member": self._member(new),
            }
        }

    def reaction_update(
        self,
        chat_id: int,
        message_id: int,
        user: Mapping[str, Any] | int | None,
        *,
        old: tuple[str, ...] = (),
        new: tuple[str, ...] = ("👍",),
        actor_chat: Mapping[str, Any] | None = None,
    ) -> JSON:
        """A `message_reaction` update: `user` (or `actor_chat`, for an anonymous admin or a
        channel) changed their emoji reactions to a message from `old` to `new`."""
        chat = self._chats.get(chat_id) or self._chat(chat_id, "supergroup", None)
        event: JSON = {
            "chat": chat,
            "message_id": message_id,
            "date": int(time.time()),
            "old_reaction": [{"type": "emoji", "emoji": e} for e in old],
            "new_reaction": [{"type": "emoji", "emoji": e} for e in new],
        }
        if user is not None:
            event["user"] = _user_json(user)
        if actor_chat is not None:
            event["actor_chat"] = dict(actor_chat)
        return {"message_reaction": event}

    def _member(self, status: str) -> JSON:
        member: JSON = {"status": status, "user": self.bot_user}
        if status in ("kicked", "restricted"):
            member["until_date"] = 0
        if status == "restricted":
            member["is_member"] = True
            member.update(_rights(ChatMemberRestricted, granted=False))
        if status == "administrator":
            member.update({"can_be_edited": False, "is_anonymous": False})
            member.update(_rights(ChatMemberAdministrator, granted=True))
        return member

    def sent_messages(self, chat_id: int) -> list[JSON]:
        """Messages the bot sent to `chat_id`, in order (edits applied, deletions kept)."""
        return list(self._sent.get(chat_id, []))

    def message(self, chat_id: int, message_id: int) -> JSON | None:
        return self._messages.get((chat_id, message_id))

    def fail_next(
        self,
        method: str,
        *,
        error_code: int,
        description: str,
        retry_after: int | None = None,
        times: int = 1,
        after: int = 0,
    ) -> None:
        """The next `times` calls of `method`, once `after` more succeeded, answer with this."""
        failure = _Failure(error_code, description, retry_after, times, after)
        self._failures.setdefault(method.lower(), []).append(failure)

    def reject_entities(self, *, times: int = 1) -> None:
        """The next `times` sendMessage calls that carry entities fail with Telegram's
        "can't parse entities" error (calls without entities still go through)."""
        self._entity_rejections += times

    def delay_next(self, method: str, seconds: float, *, times: int = 1, after: int = 0) -> None:
        """Hold the next `times` calls of `method`, once `after` more went through, for
        `seconds` before handling them (the call is recorded when it arrives)."""
        self._delays.setdefault(method.lower(), []).append(_Delay(seconds, times, after))

    def calls_of(self, method: str) -> list[Params]:
        return list(self._calls_by_method.get(method.lower(), ()))

    async def wait_for_call(
        self,
        method: str,
        count: int = 1,
        timeout: float = 5,  # noqa: ASYNC109 (a test helper: the bound is its point)
    ) -> list[Params]:
        """Wait until `method` was called at least `count` times; returns those calls (for
        one chat's sends, `wait_for_sent`)."""
        if self._called is None:
            raise RuntimeError("FakeBotApi is not started")
        condition = self._called
        async with condition:
            await asyncio.wait_for(
                condition.wait_for(
                    lambda: len(self._calls_by_method.get(method.lower(), ())) >= count
                ),
                timeout,
            )
        return self.calls_of(method)

    async def wait_for_sent(
        self,
        chat_id: int,
        count: int,
        timeout: float = 5,  # noqa: ASYNC109 (a test helper: the bound is its point)
    ) -> list[JSON]:
        """Wait until `count` messages were sent to `chat_id`; wakes only this chat's waiter
        (a load of many chats waits on each without waking the others)."""
        if len(self._sent.get(chat_id, ())) < count:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            waiters = self._sent_waiters.setdefault(chat_id, [])
            waiters.append((count, future))
            try:
                await asyncio.wait_for(future, timeout)
            finally:
                if (count, future) in waiters:
                    waiters.remove((count, future))
        return self.sent_messages(chat_id)

    # ------------------------------------------------------------ HTTP

    async def _dispatch(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return _error(401, "Unauthorized")
        name = request.match_info["method"]
        handler = self._handlers.get(name.lower())
        params = await _read_params(request)
        await self._record(name, params)
        if handler is None:
            return _error(404, "Not Found")
        delay = self._take_delay(name)
        if delay > 0 and self._stopped is not None:
            with contextlib.suppress(TimeoutError):  # stop() ends every hang
                await asyncio.wait_for(self._stopped.wait(), delay)
        failure = self._take_failure(name)
        if failure is not None:
            extra = {"retry_after": failure.retry_after} if failure.retry_after else None
            return _error(failure.error_code, failure.description, extra)
        try:
            result = await handler(params)
        except _ApiError as exc:
            return _error(exc.code, exc.description)
        return web.json_response({"ok": True, "result": result})

    async def _record(self, name: str, params: Params) -> None:
        self.calls.append((name, params))
        self.call_times.append(time.monotonic())
        self._calls_by_method.setdefault(name.lower(), []).append(params)
        if self._called is not None:
            async with self._called:
                self._called.notify_all()

    def _take_failure(self, name: str) -> _Failure | None:
        queue = self._failures.get(name.lower())
        if not queue:
            return None
        failure = queue[0]
        if failure.after > 0:
            failure.after -= 1
            return None
        failure.times -= 1
        if failure.times <= 0:
            queue.pop(0)
        return failure

    def _take_delay(self, name: str) -> float:
        queue = self._delays.get(name.lower())
        if not queue:
            return 0.0
        delay = queue[0]
        if delay.after > 0:
            delay.after -= 1
            return 0.0
        delay.times -= 1
        if delay.times <= 0:
            queue.pop(0)
        return delay.seconds

    def _wake(self) -> None:
        self._pushed.set()
        self._pushed = asyncio.Event()

    # ------------------------------------------------------------ methods

    async def _true(self, params: Params) -> bool:
        return True

    def timed_calls(self, *methods: str) -> list[tuple[float, str, Params]]:
        """(arrival time, method, params) of the calls of `methods`, in arrival order."""
        wanted = {m.lower() for m in methods}
        return [
            (at, name, params)
            for at, (name, params) in zip(self.call_times, self.calls, strict=True)
            if name.lower() in wanted
        ]

    async def _send_chat_action(self, params: Params) -> bool:
        self._chat_id(params)
        if not params.get("action"):
            raise _ApiError(400, "Bad Request: wrong parameter action in request")
        return True

    async def _send_message_draft(self, params: Params) -> bool:
        """`sendMessageDraft` (Bot API 9.3): a private chat's reply shown as it is written;
        `draft_id` must be non-zero, `text` 1-4096 characters."""
        self._chat_id(params)
        if not _int(params.get("draft_id"), 0):
            raise _ApiError(400, "Bad Request: draft_id must be non-zero")
        text = str(params.get("text", ""))
        if not text:
            raise _ApiError(400, "Bad Request: text must be non-empty")
        return True

    async def _get_file(self, params: Params) -> JSON:
        known = self._files.get(str(params.get("file_id", "")))
        if known is None:
            raise _ApiError(400, "Bad Request: invalid file_id")
        size = known.declared_size if known.declared_size is not None else len(known.data)
        result: JSON = {
            "file_id": str(params["file_id"]),
            "file_unique_id": known.unique_id,
            "file_size": size,
        }
        if size <= 20 * 1024 * 1024:  # the Bot API gives no path to a larger file
            result["file_path"] = known.path
        return result

    async def _download(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["token"] != self.token:
            return _error(401, "Unauthorized")
        path = request.match_info["path"]
        await self._record("file", {"path": path})
        self.downloads.append(path)
        delay = self._take_delay("file")
        if delay > 0 and self._stopped is not None:
            with contextlib.suppress(TimeoutError):  # a stalled download; stop() ends it
                await asyncio.wait_for(self._stopped.wait(), delay)
        for known in self._files.values():
            if known.path == path:
                return web.Response(body=known.data, content_type="application/octet-stream")
        return _error(404, "Not Found")

    async def _get_me(self, params: Params) -> JSON:
        return {
            **self.bot_user,
            "can_join_groups": True,
            "can_read_all_group_messages": self.reads_all_group_messages,
            "supports_inline_queries": False,
        }

    async def _get_updates(self, params: Params) -> list[JSON]:
        if self.webhook_url:
            raise _ApiError(
                409,
                "Conflict: can't use getUpdates method while webhook is active; "
                "use deleteWebhook to delete the webhook first",
            )
        offset = _int(params.get("offset"), 0)
        limit = min(max(_int(params.get("limit"), 100), 1), 100)
        timeout = max(_int(params.get("timeout"), 0), 0)
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
            raise _ApiError(400, "Bad Request: message text is empty")
        if utf16_len(text) > 4096:
            raise _ApiError(400, "Bad Request: message is too long")
        entities = params.get("entities")
        if entities:
            if self._entity_rejections > 0:
                self._entity_rejections -= 1
                raise _ApiError(
                    400, "Bad Request: can't parse entities: unsupported entity in the message"
                )
            _check_entities(text, entities)
        msg = self._outgoing(chat_id, params)
        msg["text"] = text
        if entities:
            msg["entities"] = entities
        return self._store_sent(msg)

    async def _send_photo(self, params: Params) -> JSON:
        chat_id = self._chat_id(params)
        photo = params.get("photo")
        if isinstance(photo, str) and photo.startswith("attach://"):
            photo = params.get(photo.removeprefix("attach://"))
        if not isinstance(photo, bytes) or not photo:
            raise _ApiError(400, "Bad Request: there is no photo in the request")
        msg = self._outgoing(chat_id, params)
        self.photos.append((chat_id, photo))
        unique = f"photo-{chat_id}-{msg['message_id']}"
        msg["photo"] = [
            {"file_id": unique, "file_unique_id": unique, "width": 800, "height": 600,
             "file_size": len(photo)}
        ]  # fmt: skip
        if caption := params.get("caption"):
            msg["caption"] = caption
        return self._store_sent(msg)

    async def _edit_message_text(self, params: Params) -> JSON:
        chat_id = self._chat_id(params)
        msg = self._existing(chat_id, params, "message to edit not found")
        text = params.get("text")
        if not isinstance(text, str) or not text.strip():
            raise _ApiError(400, "Bad Request: message text is empty")
        if msg.get("text") == text:
            raise _ApiError(
                400,
                "Bad Request: message is not modified: specified new message content and reply "
                "markup are exactly the same as a current content and reply markup of the message",
            )
        msg["text"] = text
        msg["edit_date"] = int(time.time())
        return msg

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

    async def _get_chat_member(self, params: Params) -> JSON:
        chat_id = self._chat_id(params)
        user_id = _int(params.get("user_id"), 0)
        if not user_id:
            raise _ApiError(400, "Bad Request: user not found")
        user = {"id": user_id, "is_bot": user_id == self.bot_id, "first_name": f"User {user_id}"}
        if self._creators.get(chat_id) == user_id:
            return {"status": "creator", "user": user, "is_anonymous": False}
        if user_id in self._admins.get(chat_id, set()):
            rights = _rights(ChatMemberAdministrator, granted=False)
            rights["can_delete_messages"] = True
            return {
                "status": "administrator",
                "user": user,
                "can_be_edited": False,
                "is_anonymous": False,
                **rights,
            }
        return {"status": "member", "user": user}

    async def _set_webhook(self, params: Params) -> bool:
        self.webhook_url = str(params.get("url") or "")
        return True

    async def _delete_webhook(self, params: Params) -> bool:
        self.webhook_url = ""
        if params.get("drop_pending_updates") is True:
            self._updates.clear()
        return True

    async def _get_webhook_info(self, params: Params) -> JSON:
        return {
            "url": self.webhook_url,
            "has_custom_certificate": False,
            "pending_update_count": len(self._updates),
        }

    async def _get_chat(self, params: Params) -> JSON:
        """`getChat`: a chat the bot has seen (a user's private chat once they wrote to it);
        any other id is "chat not found", as Telegram answers for a user who never started
        the bot."""
        chat_id = self._chat_id(params)
        chat = self._chats.get(chat_id)
        if chat is None:
            raise _ApiError(400, "Bad Request: chat not found")
        gifts = {"unlimited_gifts": False, "limited_gifts": False, "unique_gifts": False,
                 "premium_subscription": False, "gifts_from_channels": False}  # fmt: skip
        info: JSON = {**chat, "accent_color_id": 0, "max_reaction_count": 11}
        info["accepted_gift_types"] = gifts
        if chat_id in self._parents:  # a channel's direct-messages chat
            info["parent_chat"] = self._parents[chat_id]
        return info

    async def _set_my_commands(self, params: Params) -> bool:
        commands = params.get("commands")
        self.commands = list(commands) if isinstance(commands, list) else []
        return True

    async def _get_my_commands(self, params: Params) -> list[JSON]:
        return list(self.commands)

    # ------------------------------------------------------------ chat state

    def _chat_id(self, params: Params) -> int:
        chat_id = params.get("chat_id")
        if isinstance(chat_id, bool) or not isinstance(chat_id, int):
            raise _ApiError(400, "Bad Request: chat not found")
        return chat_id

    def _existing(self, chat_id: int, params: Params, missing: str) -> JSON:
        message_id = _int(params.get("message_id"), 0)
        msg = self._messages.get((chat_id, message_id))
        if msg is None:
            raise _ApiError(400, f"Bad Request: {missing}")
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
        thread_id = _int(params.get("message_thread_id"), 0)
        if thread_id:
            msg["message_thread_id"] = thread_id
            msg["is_topic_message"] = True
        reply = params.get("reply_parameters")
        reply_id = _int(reply.get("message_id"), 0) if isinstance(reply, dict) else 0
        allow_without = bool(isinstance(reply, dict) and reply.get("allow_sending_without_reply"))
        reply_id = reply_id or _int(params.get("reply_to_message_id"), 0)
        if reply_id:
            target = self._messages.get((chat_id, reply_id))
            if target is not None:
                msg["reply_to_message"] = {
                    k: v for k, v in target.items() if k != "reply_to_message"
                }
            elif not (allow_without or params.get("allow_sending_without_reply") is True):
                raise _ApiError(400, "Bad Request: message to be replied not found")
        return msg

    def _store_sent(self, msg: JSON) -> JSON:
        chat_id = int(msg["chat"]["id"])
        self._remember(msg)
        sent = self._sent.setdefault(chat_id, [])
        sent.append(msg)
        for count, future in self._sent_waiters.get(chat_id, ()):
            if len(sent) >= count and not future.done():
                future.set_result(None)
        return msg

    # ------------------------------------------------------------ channel direct messages
    # Bot API 9.2: a channel's direct-messages chat is a supergroup with `is_direct_messages`;
    # each user's conversation is a topic (`direct_messages_topic`), and sends there must name
    # it with `direct_messages_topic_id`. Kept in one block: it wraps the handlers above.

    def _direct_messages_setup(self) -> None:
        self._direct_chats: set[int] = set()
        self._parents: dict[int, JSON] = {}
        plain_send, plain_photo = self._handlers["sendmessage"], self._handlers["sendphoto"]
        plain_action = self._handlers["sendchataction"]

        async def send_message(params: Params) -> JSON:
            return self._in_topic(params, await plain_send(self._topic_checked(params)))

        async def send_photo(params: Params) -> JSON:
            return self._in_topic(params, await plain_photo(self._topic_checked(params)))

        async def send_chat_action(params: Params) -> bool:
            if self._chat_id(params) in self._direct_chats:
                raise _ApiError(400, "Bad Request: chat actions aren't supported in this chat")
            return bool(await plain_action(params))

        self._handlers.update(
            {
                "sendmessage": send_message,
                "sendphoto": send_photo,
                "sendchataction": send_chat_action,
            }
        )

    def direct_messages_chat(self, chat_id: int, *, channel_id: int, title: str) -> JSON:
        """Make `chat_id` the direct-messages chat of the channel `channel_id`."""
        chat: JSON = {
            "id": chat_id,
            "type": "supergroup",
            "title": f"{title} Direct Messages",
            "is_direct_messages": True,
        }
        self._chats[chat_id] = chat
        self._parents[chat_id] = {"id": channel_id, "type": "channel", "title": title}
        self._direct_chats.add(chat_id)
        return chat

    def direct_message(
        self, chat_id: int, user: Mapping[str, Any] | int, text: str, *, topic_id: int
    ) -> JSON:
        """A user's message in topic `topic_id` of a direct-messages chat (an update)."""
        update = self.user_message(chat_id, user, text)
        msg = update["message"]
        msg["direct_messages_topic"] = {"topic_id": topic_id, "user": _user_json(user)}
        self._remember(msg)
        return update

    def _topic_checked(self, params: Params) -> Params:
        chat_id = self._chat_id(params)
        if chat_id in self._direct_chats and not _int(params.get("direct_messages_topic_id"), 0):
            raise _ApiError(400, "Bad Request: direct messages topic must be specified")
        return params

    def _in_topic(self, params: Params, msg: JSON) -> JSON:
        topic = _int(params.get("direct_messages_topic_id"), 0)
        if topic and int(msg["chat"]["id"]) in self._direct_chats:
            msg["direct_messages_topic"] = {"topic_id": topic}
        return msg


# ---------------------------------------------------------------- wire helpers


async def _read_params(request: web.Request) -> Params:
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


def _error(code: int, description: str, parameters: JSON | None = None) -> web.Response:
    body: JSON = {"ok": False, "error_code": code, "description": description}
    if parameters:
        body["parameters"] = parameters
    return web.json_response(body, status=code)


def _int(value: Any, default: int) -> int:
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


def _user_json(user: Mapping[str, Any] | int) -> JSON:
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


def _rights(model: type[BaseModel], *, granted: bool) -> JSON:
    """Every `can_*` flag a chat member of this kind carries in the current Bot API."""
    return {name: granted for name in model.model_fields if name.startswith("can_")}


def _check_entities(text: str, entities: Any) -> None:
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
        raise _ApiError(400, f"Bad Request: can't parse entities: {problem}")


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

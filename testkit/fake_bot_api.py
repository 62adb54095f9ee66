"""The tests' fake Bot API on 127.0.0.1: the demo's (`adapters.telegram.fake_api`) plus the
rest of the Bot API the bot calls, a record of every call, fault injection and waits."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiogram.types import ChatMemberAdministrator, ChatMemberRestricted
from aiohttp import web
from pydantic import BaseModel

from adapters.telegram.fake_api import (
    JSON,
    ApiError,
    DemoBotApi,
    Params,
    error_response,
    int_param,
    user_json,
)


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


class FakeBotApi(DemoBotApi):
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
        super().__init__(token, bot_id=bot_id, username=username, first_name=first_name)
        self.reads_all_group_messages = reads_all_group_messages
        """getMe's `can_read_all_group_messages`: privacy mode off (BotFather's setting)."""
        self.calls: list[tuple[str, Params]] = []
        self.call_times: list[float] = []
        """`time.monotonic()` when each of `calls` arrived (same index): order and spacing
        of chat actions, drafts and replies."""
        self._calls_by_method: dict[str, list[Params]] = {}
        """`calls` by lower-cased method name (a busy load test waits on these counts)."""
        self.photos: list[tuple[int, bytes]] = []
        self.commands: list[JSON] = []
        self.webhook_url = ""
        self.webhook_error: tuple[int, str] | None = None
        """(unix time, message): what `getWebhookInfo` reports as its last delivery error."""
        self._admins: dict[int, set[int]] = {}
        self._creators: dict[int, int] = {}
        self._members: dict[int, dict[int, str]] = {}
        """Per chat set with `set_members`: user id → "member", "restricted" or "left"."""
        self._failures: dict[str, list[_Failure]] = {}
        self._delays: dict[str, list[_Delay]] = {}
        self._entity_rejections = 0
        self._files: dict[str, _File] = {}
        self.downloads: list[str] = []
        """The file paths downloaded through `/file/bot<token>/<path>`, in order."""
        self._sent_waiters: dict[int, list[tuple[int, asyncio.Future[None]]]] = {}
        self._called: asyncio.Condition | None = None
        self._stopped: asyncio.Event | None = None
        self._handlers.update(
            {
                "sendmessage": self._send_checked_message,
                "editmessagetext": self._edit_message_text,
                "getchatmember": self._get_chat_member,
                "sendphoto": self._send_photo,
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
        )
        self._direct_messages_setup()

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self._called = asyncio.Condition()
        self._stopped = asyncio.Event()
        await super().start()

    async def stop(self) -> None:
        """End every held call and long poll, then close the server."""
        if self._stopped is not None:
            self._stopped.set()
        await super().stop()

    def _add_routes(self, app: web.Application) -> None:
        app.router.add_route("GET", "/file/bot{token}/{path:.+}", self._download)

    # ------------------------------------------------------------ test controls

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

    def set_members(
        self, chat_id: int, members: set[int], *, restricted: set[int] | None = None
    ) -> None:
        """Who `getChatMember` says is in `chat_id` besides its administrators: `members`,
        and `restricted` (restricted but still members); anyone else has left. Unset, every
        user is a member."""
        statuses = dict.fromkeys(members, "member")
        statuses.update(dict.fromkeys(restricted or (), "restricted"))
        self._members[chat_id] = statuses

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
        sender = user_json(actor)
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
            event["user"] = user_json(user)
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

    def timed_calls(self, *methods: str) -> list[tuple[float, str, Params]]:
        """(arrival time, method, params) of the calls of `methods`, in arrival order."""
        wanted = {m.lower() for m in methods}
        return [
            (at, name, params)
            for at, (name, params) in zip(self.call_times, self.calls, strict=True)
            if name.lower() in wanted
        ]

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

    async def _record(self, name: str, params: Params) -> None:
        self.calls.append((name, params))
        self.call_times.append(time.monotonic())
        self._calls_by_method.setdefault(name.lower(), []).append(params)
        if self._called is not None:
            async with self._called:
                self._called.notify_all()

    async def _hold(self, name: str) -> web.Response | None:
        await self._delayed(name)
        failure = self._take_failure(name)
        if failure is None:
            return None
        extra = {"retry_after": failure.retry_after} if failure.retry_after else None
        return error_response(failure.error_code, failure.description, extra)

    async def _delayed(self, name: str) -> None:
        delay = self._take_delay(name)
        if delay > 0 and self._stopped is not None:
            with contextlib.suppress(TimeoutError):  # stop() ends every hang
                await asyncio.wait_for(self._stopped.wait(), delay)

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

    def _store_sent(self, msg: JSON) -> JSON:
        super()._store_sent(msg)
        chat_id = int(msg["chat"]["id"])
        sent = self._sent[chat_id]
        for count, future in self._sent_waiters.get(chat_id, ()):
            if len(sent) >= count and not future.done():
                future.set_result(None)
        return msg

    # ------------------------------------------------------------ methods

    async def _true(self, params: Params) -> bool:
        return True

    async def _get_me(self, params: Params) -> JSON:
        me = await super()._get_me(params)
        return {**me, "can_read_all_group_messages": self.reads_all_group_messages}

    async def _get_updates(self, params: Params) -> list[JSON]:
        if self.webhook_url:
            raise ApiError(
                409,
                "Conflict: can't use getUpdates method while webhook is active; "
                "use deleteWebhook to delete the webhook first",
            )
        return await super()._get_updates(params)

    async def _send_checked_message(self, params: Params) -> JSON:
        if params.get("entities") and self._entity_rejections > 0:
            self._entity_rejections -= 1
            raise ApiError(
                400, "Bad Request: can't parse entities: unsupported entity in the message"
            )
        return await self._send_message(params)

    async def _get_file(self, params: Params) -> JSON:
        known = self._files.get(str(params.get("file_id", "")))
        if known is None:
            raise ApiError(400, "Bad Request: invalid file_id")
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
            return error_response(401, "Unauthorized")
        path = request.match_info["path"]
        await self._record("file", {"path": path})
        self.downloads.append(path)
        await self._delayed("file")  # a stalled download; stop() ends it
        for known in self._files.values():
            if known.path == path:
                return web.Response(body=known.data, content_type="application/octet-stream")
        return error_response(404, "Not Found")

    async def _send_photo(self, params: Params) -> JSON:
        chat_id = self._chat_id(params)
        photo = params.get("photo")
        if isinstance(photo, str) and photo.startswith("attach://"):
            photo = params.get(photo.removeprefix("attach://"))
        if not isinstance(photo, bytes) or not photo:
            raise ApiError(400, "Bad Request: there is no photo in the request")
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
            raise ApiError(400, "Bad Request: message text is empty")
        if msg.get("text") == text:
            raise ApiError(
                400,
                "Bad Request: message is not modified: specified new message content and reply "
                "markup are exactly the same as a current content and reply markup of the message",
            )
        msg["text"] = text
        msg["edit_date"] = int(time.time())
        return msg

    async def _get_chat_member(self, params: Params) -> JSON:
        chat_id = self._chat_id(params)
        user_id = int_param(params.get("user_id"), 0)
        if not user_id:
            raise ApiError(400, "Bad Request: user not found")
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
        known = self._members.get(chat_id)
        status = "member" if known is None else known.get(user_id, "left")
        if status == "restricted":
            return {
                "status": "restricted",
                "user": user,
                "is_member": True,
                "until_date": 0,
                **_rights(ChatMemberRestricted, granted=True),
            }
        return {"status": status, "user": user}

    async def _set_webhook(self, params: Params) -> bool:
        self.webhook_url = str(params.get("url") or "")
        return True

    async def _delete_webhook(self, params: Params) -> bool:
        self.webhook_url = ""
        if params.get("drop_pending_updates") is True:
            self._updates.clear()
        return True

    async def _get_webhook_info(self, params: Params) -> JSON:
        info: JSON = {
            "url": self.webhook_url,
            "has_custom_certificate": False,
            "pending_update_count": len(self._updates),
        }
        if self.webhook_error is not None:
            info["last_error_date"], info["last_error_message"] = self.webhook_error
        return info

    async def _get_chat(self, params: Params) -> JSON:
        """`getChat`: a chat the bot has seen (a user's private chat once they wrote to it);
        any other id is "chat not found", as Telegram answers for a user who never started
        the bot."""
        chat_id = self._chat_id(params)
        chat = self._chats.get(chat_id)
        if chat is None:
            raise ApiError(400, "Bad Request: chat not found")
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
                raise ApiError(400, "Bad Request: chat actions aren't supported in this chat")
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
        msg["direct_messages_topic"] = {"topic_id": topic_id, "user": user_json(user)}
        self._remember(msg)
        return update

    def _topic_checked(self, params: Params) -> Params:
        chat_id = self._chat_id(params)
        if chat_id in self._direct_chats and not int_param(
            params.get("direct_messages_topic_id"), 0
        ):
            raise ApiError(400, "Bad Request: direct messages topic must be specified")
        return params

    def _in_topic(self, params: Params, msg: JSON) -> JSON:
        topic = int_param(params.get("direct_messages_topic_id"), 0)
        if topic and int(msg["chat"]["id"]) in self._direct_chats:
            msg["direct_messages_topic"] = {"topic_id": topic}
        return msg


def _rights(model: type[BaseModel], *, granted: bool) -> JSON:
    """Every `can_*` flag a chat member of this kind carries in the current Bot API."""
    return {name: granted for name in model.model_fields if name.startswith("can_")}

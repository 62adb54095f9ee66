"""`tgbot context show`: print the next request the model would be sent for a chat, without
sending anything (the stored history through the real wiring and `TurnRunner.prepare`).

On PostgreSQL the request carries the chat's `[Already told the user]` lines from the table
the workers share, as the next turn will (read only: nothing is confirmed). On SQLite those
notes live in the running bot's memory, which another process cannot read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.app.mcp_servers import offered_tools
from bot.app.preflight import check_database_url, opening_database
from bot.app.wiring import build_app, open_store
from bot.config import Settings, load_settings
from bot.context.tokens import estimate_message_tokens
from bot.domain.ids import SessionKey
from bot.domain.messages import ChatMessage
from bot.domain.platform_messages import Delivery
from bot.domain.records import AssistantRecord, StoredRecord
from bot.errors import NotBuiltError, SessionNotFound
from bot.ports import BubbleHook, SessionInfo
from bot.store_ports import ConversationStore


async def context_show(config: str | None, *, chat_id: int, thread_id: int) -> int:
    settings = load_settings(config)
    async with opening_database(check_database_url(settings)):
        store = await open_store(settings)
    try:
        key = SessionKey(chat_id=chat_id, thread_id=thread_id)
        print((await preview_request(settings, store, key)).text)
    finally:
        await store.close()
    return 0


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestPreview:
    """The next request of a session: `text` is what `tgbot context show` prints (the
    dashboard's chat page shows the same)."""

    session: SessionInfo
    text: str
    fixed_tokens: int
    history_tokens: int
    current_tokens: int
    records: tuple[StoredRecord, ...]
    """The window the request was projected from, oldest first."""


async def preview_request(
    settings: Settings, store: ConversationStore, key: SessionKey
) -> RequestPreview:
    """Prepare the session's next request without sending or storing anything."""
    session = await store.find_session(key)
    if session is None:
        raise SessionNotFound(
            f"no conversation stored for chat {key.chat_id} thread {key.thread_id}"
        )
    bot_id, bot_name = await _stored_bot_identity(store, session)
    app = build_app(
        settings,
        store=store,
        messenger=_NoMessenger(),
        bot_id=bot_id,
        bot_name=bot_name,
        extra_tools=offered_tools(settings),  # what a running bot offers from MCP servers
    )
    try:
        told = await app.told.peek(key.chat_id, key.thread_id)
        state = await app.runner.prepare(
            session, turn_id="preview", told_user=told, persist_window=False
        )
    finally:
        await app.routes.aclose()
    history, current = token_split(state.messages, state.layout.current_index)
    return RequestPreview(
        session=state.window.session,
        text=render_request_preview(
            state.messages, state.layout.current_index, state.layout.fixed_tokens
        ),
        fixed_tokens=state.layout.fixed_tokens,
        history_tokens=history,
        current_tokens=current,
        records=state.window.records,
    )


async def _stored_bot_identity(
    store: ConversationStore, session: SessionInfo
) -> tuple[int | None, str]:
    """The bot's id and name as its last delivered reply in this chat recorded them, so the
    preview renders the system prompt and headers as the running bot does (no network)."""
    loaded = await store.load_history(session.id, max_records=200)
    for record in reversed(loaded.records):
        if isinstance(record.body, AssistantRecord) and record.message_id is not None:
            message = await store.find_platform_message(session.key.chat_id, record.message_id)
            if message is not None and message.sender_id is not None:
                return message.sender_id, message.sender_name or "tgbot"
    return None, "tgbot"


def token_split(messages: Sequence[ChatMessage], current_index: int) -> tuple[int, int]:
    """(history, current) tokens of a request: the non-system messages before the current
    message, and the current message with what follows it."""
    history = current = 0
    for index, message in enumerate(messages):
        if message.role == "system":
            continue
        if index < current_index:
            history += estimate_message_tokens(message)
        else:
            current += estimate_message_tokens(message)
    return history, current


def render_request_preview(messages: Sequence[ChatMessage], current_index: int, fixed: int) -> str:
    """Exactly what the model would be sent next, message by message, with the token split."""
    lines: list[str] = []
    for index, message in enumerate(messages):
        tokens = estimate_message_tokens(message)
        lines.append(f"--- [{index}] {message.role} ({tokens} tokens)")
        if message.content:
            lines.append(message.content)
        for call in message.tool_calls:
            lines.append(f"tool_call {call.id}: {call.name}({call.arguments})")
    history, current = token_split(messages, current_index)
    lines.append("---")
    lines.append(
        f"tokens: fixed {fixed} (system + tool schemas), history {history}, "
        f"current {current}, total {fixed + history + current}"
    )
    return "\n".join(lines)


class _NoMessenger:
    """For `context show`, which prepares a request and never sends anything."""

    async def send_text(
        self,
        chat_id: int,
        text: str,
        *,
        thread_id: int = 0,
        reply_to: int | None = None,
        on_bubble: BubbleHook | None = None,
    ) -> Delivery:
        raise NotBuiltError("context show does not send messages")

    async def delete_message(self, chat_id: int, message_id: int) -> None:
        raise NotBuiltError("context show does not send messages")

    async def set_reaction(self, chat_id: int, message_id: int, emoji: str) -> None:
        raise NotBuiltError("context show does not send messages")

    async def is_chat_admin(self, chat_id: int, user_id: int) -> bool:
        raise NotBuiltError("context show does not ask Telegram")

    async def send_photo(
        self, chat_id: int, photo: bytes, *, caption: str = "", thread_id: int = 0
    ) -> int:
        raise NotBuiltError("context show does not send messages")

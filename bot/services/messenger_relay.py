"""`MessengerRelay`: a `Messenger` that hands every call to the one it wraps.

The decorators around the Telegram sender (the closed-chat guard, the told-user book, the
refused-send log) each change one or two calls; they subclass this and override only those.
"""

from __future__ import annotations

from bot.ports import BubbleHook, Delivery, Messenger


class MessengerRelay:
    """Forwards every `Messenger` call to `inner` unchanged."""

    def __init__(self, inner: Messenger) -> None:
        self.inner = inner

    async def send_text(
        self,
        chat_id: int,
        text: str,
        *,
        thread_id: int = 0,
        reply_to: int | None = None,
        on_bubble: BubbleHook | None = None,
    ) -> Delivery:
        return await self.inner.send_text(
            chat_id, text, thread_id=thread_id, reply_to=reply_to, on_bubble=on_bubble
        )

    async def delete_message(self, chat_id: int, message_id: int) -> None:
        await self.inner.delete_message(chat_id, message_id)

    async def set_reaction(self, chat_id: int, message_id: int, emoji: str) -> None:
        await self.inner.set_reaction(chat_id, message_id, emoji)

    async def is_chat_admin(self, chat_id: int, user_id: int) -> bool:
        return await self.inner.is_chat_admin(chat_id, user_id)

    async def send_photo(
        self, chat_id: int, photo: bytes, *, caption: str = "", thread_id: int = 0
    ) -> int:
        return await self.inner.send_photo(chat_id, photo, caption=caption, thread_id=thread_id)

"""Who wrote a message, and the names of users and chats, as the model reads them."""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from aiogram.types import Chat, Message, User

from adapters.telegram.text_units import one_line
from bot.context.escaping import is_invisible
from bot.domain.facts import Sender


def sender_of(msg: Message) -> Sender:
    """Who wrote `msg`: a user, a bot, an anonymous admin (sender_chat is the chat) or a channel.

    A channel or an anonymous admin that signs (`author_signature`) keeps the signature in
    its name; `via_bot` records an inline bot the message was sent through.
    """
    via = msg.via_bot
    via_bot = (f"@{via.username}" if via.username else user_name(via)) if via else None
    chat = msg.sender_chat
    if chat is None and msg.from_user is None:
        if msg.chat.type == "private":  # the only other person there wrote it
            name = chat_name_of(msg.chat)
            return Sender(id=msg.chat.id, name=name, username=msg.chat.username, via_bot=via_bot)
        if msg.chat.type == "channel":
            chat = msg.chat
    if chat is not None:
        kind: Literal["anonymous_admin", "channel"] = (
            "anonymous_admin" if chat.id == msg.chat.id and chat.type != "channel" else "channel"
        )
        name = chat_name_of(chat)
        if msg.author_signature and one_line(msg.author_signature) != name:
            name = f"{name} ({one_line(msg.author_signature)})"
        return Sender(id=chat.id, name=name, username=chat.username, kind=kind, via_bot=via_bot)
    user = msg.from_user
    if user is not None:
        return replace(user_sender(user), via_bot=via_bot)
    return Sender(id=0, name="", via_bot=via_bot)


def user_sender(user: User) -> Sender:
    return Sender(
        id=user.id,
        name=user_name(user),
        username=user.username,
        is_bot=user.is_bot,
        kind="bot" if user.is_bot else "user",
    )


def user_name(user: User) -> str:
    """The user's name; a name that shows nothing (only U+200E, fillers, spaces) falls back
    to `@username`, else to the id (the header then shows `user_id:` alone)."""
    full = one_line(" ".join(part for part in (user.first_name, user.last_name) if part))
    if not is_invisible(full):
        return full
    return f"@{user.username}" if user.username else str(user.id)


def chat_name_of(chat: Chat) -> str:
    """A chat's title, else its person's name, else `@username`, else its id."""
    if chat.title:
        return one_line(chat.title)
    full = one_line(" ".join(part for part in (chat.first_name, chat.last_name) if part))
    if not is_invisible(full):
        return full
    return f"@{chat.username}" if chat.username else str(chat.id)


def _known_chat_name(chat: Chat) -> str | None:
    """`chat_name_of` when the chat has a name at all (not just an id)."""
    name = chat_name_of(chat)
    return None if name == str(chat.id) else name

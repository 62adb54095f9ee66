"""Which language the bot speaks to whom (`ChatLocales`, `BOT_LOCALE`): one forced locale, or
with `auto` each member's own (their Telegram `language_code`: `zh…` is Chinese, anything
else English), and a group the language most of its recent members wrote with.

What the bot says in reply to one message (a command's answer, a refusal) follows its
sender; what belongs to the chat (the model's prompt and the projection's placeholders, a
failed turn's notice, a crash notice) follows the chat, so a group's cached prompt does not
flip with every speaker. Kept in memory: after a restart each chat's first message sets it
again; until a chat has a member with a known language, `fallback` is used.
"""

from __future__ import annotations

from collections import OrderedDict, deque

from bot.domain.facts import InboundMessage
from bot.domain.ids import Locale

RECENT_MEMBERS = 10
"""How many of a group's latest messages with a known language decide its locale."""
CLEAR_CHANGE = 7
"""How many of those must be in the other language before a chat's locale changes: it is
sticky (two languages taking turns never flip it), so its prompt and history keep their
cached prefix; the member's own language rides in the per-turn block."""
MAX_TRACKED = 10_000
"""Chats and members remembered (the least recently heard go first)."""


def locale_of_language(code: str | None) -> Locale | None:
    """`zh`, `zh-hans`, `zh-TW` → zh; any other tag → en; none → None."""
    if not code:
        return None
    return "zh" if code.lower().split("-", 1)[0] == "zh" else "en"


class ChatLocales:
    """The locale of a message, a chat and a member; `fixed` (BOT_LOCALE=zh|en) wins."""

    def __init__(self, *, fixed: Locale | None, fallback: Locale = "en") -> None:
        self.fixed = fixed
        self.fallback = fixed or fallback
        self._chats: OrderedDict[int, deque[tuple[int, Locale]]] = OrderedDict()
        """Per chat: (message id, locale) of its latest member messages with a language."""
        self._members: OrderedDict[int, Locale] = OrderedDict()
        self._settled: dict[int, Locale] = {}
        """Per chat: its locale, changed only by a clear change of language (`CLEAR_CHANGE`)."""

    def note(self, message: InboundMessage) -> None:
        """Remember the language of a member's message (bots and channels do not count)."""
        if self.fixed is not None or message.sender.kind != "user" or message.sender.is_bot:
            return
        locale = locale_of_language(message.language_code)
        if locale is None:
            return
        recent = self._chats.pop(message.chat_id, None) or deque(maxlen=RECENT_MEMBERS)
        if all(seen != message.message_id for seen, _ in recent):  # a message counts once
            recent.append((message.message_id, locale))
        self._chats[message.chat_id] = recent
        settled = self._settled.get(message.chat_id)
        other = sum(1 for _, heard in recent if heard != settled)
        if settled is None or other >= CLEAR_CHANGE:  # the first heard, or a clear change
            self._settled[message.chat_id] = locale
        self._members.pop(message.sender.id, None)
        self._members[message.sender.id] = locale
        for remembered in (self._chats, self._members):
            while len(remembered) > MAX_TRACKED:
                gone, _ = remembered.popitem(last=False)
                if remembered is self._chats:
                    self._settled.pop(gone, None)

    def for_message(self, message: InboundMessage) -> Locale:
        """The sender's language, else the chat's."""
        if self.fixed is not None:
            return self.fixed
        return locale_of_language(message.language_code) or self.for_chat(message.chat_id)

    def for_chat(self, chat_id: int) -> Locale:
        """The chat's sticky language: the first one heard there, changed only when
        `CLEAR_CHANGE` of its `RECENT_MEMBERS` latest messages are in the other (a
        bilingual group keeps one, whoever spoke last)."""
        if self.fixed is not None:
            return self.fixed
        return self._settled.get(chat_id, self.fallback)

    def member_language(self, user_id: int) -> Locale | None:
        """The language a member last wrote with; None when not heard (or forced)."""
        if self.fixed is not None:
            return None
        return self._members.get(user_id)

    def for_member(self, user_id: int) -> Locale:
        """The language a member last wrote with (the owner's, for the daily summary)."""
        if self.fixed is not None:
            return self.fixed
        return self._members.get(user_id, self.fallback)

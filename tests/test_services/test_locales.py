"""`BOT_LOCALE`: a forced locale, or (`auto`) each member's language and a chat's majority."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.domain.facts import InboundMessage, Sender
from bot.texts import ChatLocales, locale_of_language

AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
GROUP = -100500


def said(user: int, code: str | None, *, message_id: int, chat: int = GROUP) -> InboundMessage:
    return InboundMessage(
        chat_id=chat,
        chat_type="supergroup" if chat < 0 else "private",
        message_id=message_id,
        date=AT,
        sender=Sender(id=user, name=f"U{user}"),
        text="hi",
        language_code=code,
    )


@pytest.mark.parametrize(
    ("code", "locale"),
    [("zh", "zh"), ("zh-hans", "zh"), ("ZH-TW", "zh"), ("en", "en"), ("de", "en"),
     ("zhx", "en"), ("", None), (None, None)],
)  # fmt: skip
def test_a_language_code_is_chinese_or_english(code: str | None, locale: str | None) -> None:
    assert locale_of_language(code) == locale


def test_a_member_is_answered_in_their_own_language_and_a_chat_in_its_majority() -> None:
    locales = ChatLocales(fixed=None)
    assert locales.for_chat(GROUP) == "en"  # nobody heard yet: the fallback
    locales.note(said(1, "zh-hans", message_id=1))
    locales.note(said(2, "zh", message_id=2))
    locales.note(said(3, "en", message_id=3))
    assert locales.for_chat(GROUP) == "zh"
    assert locales.for_message(said(3, "en", message_id=4)) == "en"
    assert locales.for_message(said(4, None, message_id=5)) == "zh"  # unknown: the chat's
    assert locales.for_member(1) == "zh"
    assert locales.for_member(99) == "en"


def test_two_languages_taking_turns_never_flip_a_chat() -> None:
    """Issue 50, item 10: a bilingual group keeps one language (its cached prefix holds);
    each member's own rides in the per-turn block (`member_language`)."""
    locales = ChatLocales(fixed=None)
    for n in range(20):
        locales.note(said(1 + n % 2, ("zh", "en")[n % 2], message_id=n))
        assert locales.for_chat(GROUP) == "zh"  # the first heard, whoever spoke last
    assert locales.member_language(1) == "zh"
    assert locales.member_language(2) == "en"
    assert locales.member_language(3) is None


def test_a_clear_change_of_language_changes_the_chat_and_a_message_counts_once() -> None:
    locales = ChatLocales(fixed=None)
    for n in range(10):
        locales.note(said(1, "zh", message_id=n))
    for n in range(10, 16):
        locales.note(said(2, "en", message_id=n))
    locales.note(said(2, "en", message_id=15))  # the same message seen twice (a batch)
    assert locales.for_chat(GROUP) == "zh"  # 6 of the last 10: not clear yet
    locales.note(said(2, "en", message_id=16))
    assert locales.for_chat(GROUP) == "en"  # 7 of the last 10


def test_a_forced_locale_wins_everywhere() -> None:
    locales = ChatLocales(fixed="zh")
    locales.note(said(1, "en", message_id=1))
    assert locales.for_message(said(1, "en", message_id=2)) == "zh"
    assert locales.for_chat(GROUP) == "zh"
    assert locales.for_member(1) == "zh"

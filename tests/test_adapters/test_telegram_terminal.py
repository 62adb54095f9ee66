"""The terminal as the bot's chat platform (`tgbot chat`): typed lines in, printed bubbles out."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import pytest

from adapters.telegram.terminal import (
    TERMINAL_IDS_FROM,
    Owner,
    PlatformIds,
    TerminalMessenger,
    split_like_telegram,
    typed_messages,
)
from bot.domain.platform_messages import Delivery
from bot.errors import TelegramBadRequest

OWNER = Owner(id=4242, name="Ada", language_code="zh")
AT = datetime(2026, 12, 7, 6, 0, 5, tzinfo=UTC)


def _typed(text: str, *, bot_username: str | None = "helper_bot") -> list[object]:
    return list(
        typed_messages(
            text, owner=OWNER, ids=PlatformIds(0), at=AT, bot_username=bot_username, locale="en"
        )
    )


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("/help", "help"),
        ("/USAGE today", "usage"),
        ("/model@helper_bot fast", "model"),
        ("/model@other_bot fast", None),  # addressed to another bot, as Telegram parses it
        ("hello /help", None),
        ("/", None),
        ("/日本", None),  # Telegram marks no command in other scripts
    ],
    ids=["bare", "upper-case", "to-us", "to-another-bot", "not-first", "slash-only", "non-latin"],
)
def test_a_typed_command_is_parsed_as_telegram_delivers_it(text: str, command: str | None) -> None:
    (message,) = typed_messages(
        text, owner=OWNER, ids=PlatformIds(0), at=AT, bot_username="helper_bot", locale="en"
    )
    assert message.command == command
    assert message.text == text


def test_a_typed_line_is_the_owner_s_private_message() -> None:
    (message,) = typed_messages(
        "where is the kettle?",
        owner=OWNER,
        ids=PlatformIds(7),
        at=AT,
        bot_username=None,
        locale="en",
    )
    assert message.chat_id == OWNER.id
    assert message.chat_type == "private"
    assert (message.sender.id, message.sender.name, message.sender.kind) == (4242, "Ada", "user")
    assert message.language_code == "zh"
    assert message.date == AT.replace(microsecond=0)
    assert message.update_id is None  # the update log is Telegram's
    assert message.message_id == TERMINAL_IDS_FROM + 7


def test_ids_are_above_telegram_s_and_a_later_session_starts_above_an_earlier_one() -> None:
    earlier, later = PlatformIds(1_000), PlatformIds(1_050)
    taken = [earlier.take() for _ in range(50)]
    assert taken == list(range(TERMINAL_IDS_FROM + 1_000, TERMINAL_IDS_FROM + 1_050))
    assert later.take() > taken[-1]
    assert taken[-1] < 2**53  # exact as a JavaScript number (the dashboard)


@pytest.mark.parametrize(
    ("text", "sizes"),
    [
        ("short", [5]),
        ("x" * 4096, [4096]),
        ("x" * 4097, [4096, 1]),
        ("word " * 1000, [4094, 905]),  # cut at the last space before the limit
        ("x" * 1500 + " " + "y" * 4000, [4096, 1405]),  # no space in the second half: hard cut
        ("a\n" * 2100, [4095, 104]),
    ],
    ids=["short", "at-limit", "one-over", "words", "one-space-early", "lines"],
)
def test_a_long_line_is_split_as_telegram_apps_split_it(text: str, sizes: list[int]) -> None:
    pieces = split_like_telegram(text)
    assert [len(p) for p in pieces] == sizes
    # nothing is lost but the whitespace at the cuts
    assert "".join(" ".join(pieces).split()) == "".join(text.split())


def _messenger(out: io.StringIO, *, limit: int = 4096) -> TerminalMessenger:
    return TerminalMessenger(out, chat_id=OWNER.id, ids=PlatformIds(0), now=lambda: AT, limit=limit)


async def test_a_reply_is_printed_as_the_bubbles_telegram_would_show() -> None:
    out = io.StringIO()
    confirmed: list[Delivery] = []

    async def on_bubble(delivery: Delivery) -> None:
        confirmed.append(delivery)

    delivery = await _messenger(out, limit=40).send_text(
        OWNER.id,
        "**Kettle:** second shelf.\n\n" + "The tea is beside it, in the tin. " * 2,
        on_bubble=on_bubble,
    )
    printed = out.getvalue().splitlines()
    assert printed[0] == "Kettle: second shelf."  # formatting applied, as the member reads it
    assert len(delivery.message_ids) == len(confirmed) > 1
    assert all(mid is not None and mid >= TERMINAL_IDS_FROM for mid in delivery.message_ids)
    assert delivery.texts[0].startswith("**Kettle:**")  # the Markdown as the model wrote it
    assert delivery.error is None


async def test_another_chat_is_refused_as_telegram_refuses_and_nothing_is_printed() -> None:
    out = io.StringIO()
    messenger = _messenger(out)
    delivery = await messenger.send_text(-1001234, "to the group")
    assert not delivery.delivered
    assert isinstance(delivery.error, TelegramBadRequest)
    assert "no Telegram connection" in str(delivery.error)
    with pytest.raises(TelegramBadRequest, match="chat -1001234"):
        await messenger.set_reaction(-1001234, 5, "👍")
    with pytest.raises(TelegramBadRequest):
        await messenger.send_photo(-1001234, b"png")
    assert out.getvalue() == ""


async def test_reactions_deletions_and_photos_are_notes() -> None:
    out = io.StringIO()
    messenger = _messenger(out)
    await messenger.set_reaction(OWNER.id, 5, "👍")
    await messenger.set_reaction(OWNER.id, 5, "")
    await messenger.delete_message(OWNER.id, 9)
    photo_id = await messenger.send_photo(OWNER.id, b"\x89PNG" * 300, caption="usage")
    assert out.getvalue().splitlines() == [
        "(the bot reacted 👍)",
        "(the bot took its reaction back)",
        "(the bot deleted message 9)",
        "(a photo, 1,200 bytes: usage)",
    ]
    assert photo_id >= TERMINAL_IDS_FROM
    assert await messenger.is_chat_admin(OWNER.id, OWNER.id) is False

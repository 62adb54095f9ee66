"""`PacingBook` and `LocalSendPacer`: Telegram's send limits as slots, on a virtual clock."""

from __future__ import annotations

import itertools

import pytest

from bot.services.send_pacing import LocalSendPacer, PaceLimits, PacingBook

GROUP = -100123
PRIVATE = 4242
FAQ = PaceLimits()  # 1 a second per chat, 20 a minute per group, 30 a second per bot


def most_in_a_minute(slots: list[float]) -> int:
    """The largest number of `slots` inside any half-open 60 s window."""
    ordered = sorted(slots)
    return max(sum(1 for other in ordered if start <= other < start + 60) for start in ordered)


def test_22_group_messages_asked_within_14_s_get_22_slots_never_20_in_a_minute() -> None:
    book = PacingBook(FAQ)
    asked = [i * 14 / 21 for i in range(22)]  # two members, 22 replies in 14 s
    slots = [book.reserve(GROUP, "message", now) for now in asked]
    assert len(slots) == 22  # nothing refused
    assert slots == sorted(slots)  # in the order asked
    assert most_in_a_minute(slots) <= 20
    assert all(b - a >= 1.0 for a, b in itertools.pairwise(slots))
    assert slots[20] == pytest.approx(slots[0] + 61)  # a minute (and a second) after the 1st


def test_a_private_chat_is_spaced_a_second_apart_with_no_minute_budget() -> None:
    book = PacingBook(FAQ)
    slots = [book.reserve(PRIVATE, "message", 0.0) for _ in range(30)]
    assert slots == [float(i) for i in range(30)]


def test_reactions_keep_the_chat_spacing_but_leave_the_group_minute_alone() -> None:
    book = PacingBook(FAQ)
    reactions = [book.reserve(GROUP, "reaction", 0.0) for _ in range(80)]
    assert reactions == [float(i) for i in range(80)]
    # the group's 20 messages a minute are all still there
    messages = [book.reserve(GROUP, "message", 80.0) for _ in range(20)]
    assert messages == [80.0 + i for i in range(20)]


def test_a_pause_moves_every_later_slot_of_that_chat_only() -> None:
    book = PacingBook(FAQ)
    book.reserve(GROUP, "message", 0.0)
    book.pause(GROUP, 7.0)
    assert book.paused(GROUP, 3.0)
    assert not book.paused(GROUP, 7.0)
    assert book.reserve(GROUP, "message", 3.0) == 7.0
    assert book.reserve(GROUP - 1, "message", 3.0) == 3.0  # another chat is not held


def test_the_bot_wide_budget_spaces_sends_over_all_chats() -> None:
    book = PacingBook(PaceLimits(per_bot_per_second=30))
    slots = [book.bot_slot(0.0) for _ in range(61)]
    assert slots[30] == pytest.approx(1.0)
    assert slots[60] == pytest.approx(2.0)
    assert sum(1 for s in slots if s < 1.0 - 1e-9) == 30


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        (PaceLimits(per_chat_per_second=0, per_group_per_minute=0), [0.0] * 5),
        (PaceLimits(per_chat_per_second=4, per_group_per_minute=0), [0.0, 0.25, 0.5, 0.75, 1.0]),
        (PaceLimits(per_chat_per_second=0, per_group_per_minute=2), [0.0, 0.0, 61.0, 61.0, 122.0]),
    ],
    ids=["all-off", "four-a-second", "two-a-minute"],
)
def test_each_budget_follows_its_setting(limits: PaceLimits, expected: list[float]) -> None:
    book = PacingBook(limits)
    assert [book.reserve(GROUP, "message", 0.0) for _ in range(5)] == expected


def test_idle_chats_are_forgotten() -> None:
    book = PacingBook(FAQ)
    for chat in range(1, 100):
        book.reserve(chat, "message", 0.0)
    book.pause(-5, 500.0)
    book.sweep(120.0)
    assert book.tracked == 1  # only the chat still paused


async def test_the_local_pacer_answers_in_seconds_to_wait() -> None:
    now = [100.0]
    pacer = LocalSendPacer(FAQ, now=lambda: now[0])
    assert await pacer.reserve(PRIVATE, "message") == 0.0
    assert await pacer.reserve(PRIVATE, "message") == pytest.approx(1.0)
    await pacer.pause(PRIVATE, 5.0)
    assert not await pacer.may_show(PRIVATE)
    assert await pacer.may_show(GROUP)
    now[0] = 105.0
    assert await pacer.may_show(PRIVATE)

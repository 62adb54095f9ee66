from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.context.history_trim import (
    BREADCRUMB_TEXT,
    TrimResult,
    breadcrumb_message,
    insert_breadcrumb,
    trim_to_recent_turns,
    with_breadcrumb,
)
from bot.context.tokens import estimate_history_tokens
from bot.context.turn_cap import trim_conversation_to_recent_turns, trim_to_recent_turn_count
from bot.context.turns import leading_system_count, remove_orphaned_tool_messages, turn_starts
from bot.domain.messages import ChatMessage
from tests.test_context.histories import (
    assistant,
    crumb,
    histories,
    prompt_results,
    system,
    three_turns,
    tool,
    user,
)

H = three_turns()  # 49 tokens, 3 turns
S, U1, A1, U2, A2, U3, A3 = H
C = crumb()
ORPHAN = assistant("orphan......")  # an orphan prefix message, 7 tokens
X = user("x..........!")  # 7 tokens


def kept(messages: Sequence[ChatMessage], result: TrimResult) -> list[int]:
    """Indexes of `messages` the result kept, by identity."""
    ids = [id(m) for m in result.messages]
    return [i for i, m in enumerate(messages) if id(m) in ids]


# ---------------------------------------------------------------- token budget

TOKEN_CASES = [
    # (messages, budget, crumb_present, kept indexes, dropped msgs, dropped turns, kept turns,
    #  tokens before, tokens after)
    (H, 0, False, [0, 1, 2, 3, 4, 5, 6], 0, 0, 3, 49, 49),
    (H, 49, False, [0, 1, 2, 3, 4, 5, 6], 0, 0, 3, 49, 49),
    (H, 48, False, [0, 3, 4, 5, 6], 2, 1, 2, 49, 35),
    (H, 35, False, [0, 3, 4, 5, 6], 2, 1, 2, 49, 35),
    (H, 34, False, [0, 5, 6], 4, 2, 1, 49, 21),
    (H, 3, False, [0, 5, 6], 4, 2, 1, 49, 21),
    ([U1, A1, U2, A2], 14, False, [2, 3], 2, 1, 1, 28, 14),
    ([S, U1, A1, A2, A3], 5, False, [0, 1, 2, 3, 4], 0, 0, 1, 35, 35),
    ([S, C, U1, A1, U2, A2], 41, False, [0, 1, 4, 5], 2, 1, 1, 42, 28),
    ([S, X, U1, A1, U2, A2], 41, True, [0, 1, 4, 5], 2, 1, 1, 42, 28),
    ([S, X, U1, A1, U2, A2], 41, False, [0, 2, 3, 4, 5], 1, 1, 2, 42, 35),
    ([S, ORPHAN, U1, A1, U2, A2], 35, False, [0, 4, 5], 3, 1, 1, 42, 21),
    ([S, ORPHAN, U1, A1], 10, False, [0, 1, 2, 3], 0, 0, 1, 28, 28),
    ([S, U1, system(), A1, U2, A2], 35, False, [0, 4, 5], 2, 1, 1, 42, 21),
    ([S, U1, user(merged=True), A1, U2, A2], 35, False, [0, 4, 5], 3, 1, 1, 42, 21),
    ([S, U1, A1, prompt_results("........"), A2, U2, A3], 21, False, [0, 5, 6], 4, 1, 1, 52, 21),
    ([S, user(BREADCRUMB_TEXT), A1, U2, A2], 28, False, [0, 3, 4], 2, 1, 1, 45, 21),
    (
        [user(tokens=100), assistant(tokens=1), U2, assistant(tokens=0)],
        8,
        False,
        [2, 3],
        2,
        1,
        1,
        108,
        7,
    ),
]
TOKEN_IDS = [
    "budget 0 is off",
    "fits exactly",
    "one over drops the oldest turn",
    "fewest turns dropped",
    "two turns",
    "newest turn kept over budget",
    "no system prefix",
    "one turn is never trimmed",
    "flagged crumb kept, not counted",
    "crumb_present marks an unflagged crumb",
    "without the flag it is a real turn",
    "orphan prefix leaves with the first turn",
    "orphan prefix and one turn: unchanged",
    "mid-history system row leaves with its turn, not counted",
    "merged user message is one turn",
    "[Tool results] belongs to the previous turn",
    "breadcrumb text without the flag is a real turn",
    "cached estimates are honoured",
]


@pytest.mark.parametrize(
    (
        "messages",
        "budget",
        "crumb_present",
        "indexes",
        "d_msgs",
        "d_turns",
        "k_turns",
        "before",
        "after",
    ),
    TOKEN_CASES,
    ids=TOKEN_IDS,
)
def test_trim_to_recent_turns(
    messages: list[ChatMessage],
    budget: int,
    crumb_present: bool,
    indexes: list[int],
    d_msgs: int,
    d_turns: int,
    k_turns: int,
    before: int,
    after: int,
) -> None:
    result = trim_to_recent_turns(messages, budget, crumb_present=crumb_present)
    assert kept(messages, result) == indexes
    assert list(result.messages) == [messages[i] for i in indexes]
    assert (result.dropped_messages, result.dropped_turns, result.kept_turns) == (
        d_msgs,
        d_turns,
        k_turns,
    )
    assert (result.tokens_before, result.tokens_after) == (before, after)
    assert result.trimmed == (len(indexes) < len(messages))


def test_a_tool_exchange_leaves_whole() -> None:
    history = [
        S,
        U1,
        assistant("", "a", "b"),
        tool("b"),
        tool("a"),
        A1,
        U2,
        A2,
    ]
    result = trim_to_recent_turns(history, 20)
    assert result.messages == (S, U2, A2)
    assert result.dropped == tuple(history[1:6])
    assert result.dropped_messages == 5


def test_unchanged_result_is_the_same_messages_in_order() -> None:
    result = trim_to_recent_turns(tuple(H), 1_000)
    assert result.messages == tuple(H)
    assert not result.trimmed
    assert result.dropped == ()


# ---------------------------------------------------------------- turn count

COUNT_CASES = [
    (H, 2, False, [0, 3, 4, 5, 6], 1),
    (H, 1, False, [0, 5, 6], 2),
    (H, 0, False, [0, 5, 6], 2),
    (H, 3, False, [0, 1, 2, 3, 4, 5, 6], 0),
    (H, 9, False, [0, 1, 2, 3, 4, 5, 6], 0),
    ([S, U1, A1, A2], 0, False, [0, 1, 2, 3], 0),
    ([ORPHAN, U1, A1, U2], 1, False, [3], 1),
    ([S, X, U1, A1, U2, A2], 1, True, [0, 1, 4, 5], 1),
    ([S, C, U1, A1, U2, A2], 1, False, [0, 1, 4, 5], 1),
]
COUNT_IDS = [
    "keep two of three",
    "keep one",
    "zero keeps the newest turn",
    "exactly at the cap",
    "under the cap",
    "one turn with cap 0",
    "orphan prefix leaves with the first turn",
    "unflagged crumb with crumb_present",
    "flagged crumb",
]


@pytest.mark.parametrize(
    ("messages", "max_turns", "crumb_present", "indexes", "d_turns"), COUNT_CASES, ids=COUNT_IDS
)
def test_trim_to_recent_turn_count(
    messages: list[ChatMessage],
    max_turns: int,
    crumb_present: bool,
    indexes: list[int],
    d_turns: int,
) -> None:
    result = trim_to_recent_turn_count(messages, max_turns, crumb_present=crumb_present)
    assert kept(messages, result) == indexes
    assert result.dropped_turns == d_turns
    assert result.tokens_after == estimate_history_tokens(result.messages)
    assert result.tokens_before == estimate_history_tokens(messages)


# ---------------------------------------------------------------- structured history

S2 = system("second rule.")


@pytest.mark.parametrize(
    ("messages", "max_turns", "crumb_present", "expected", "d_msgs", "d_turns"),
    [
        ([S, U1, A1, S2, U2, A2, U3, A3], 2, False, [S, S2, U2, A2, U3, A3], 2, 1),
        ([S, U1, A1, U2, S2, A2, U3, A3], 1, False, [S, S2, U3, A3], 4, 2),
        ([S, C, U1, A1, U2, A2], 1, False, [S, U2, A2], 2, 1),
        ([S, X, U1, A1, U2, A2], 1, True, [S, U2, A2], 2, 1),
        ([U1, S2, A1], 0, False, [U1, S2, A1], 0, 0),
        ([S, C, U1, S2, A1, U2], 2, False, [S, C, U1, S2, A1, U2], 0, 0),
    ],
    ids=[
        "system row of a dropped turn is hoisted",
        "system row of a kept turn is hoisted too",
        "old flagged crumb dropped, not counted",
        "old unflagged crumb dropped, not counted as a turn",
        "unchanged: no hoisting",
        "unchanged: crumb stays",
    ],
)
def test_trim_conversation_to_recent_turns(
    messages: list[ChatMessage],
    max_turns: int,
    crumb_present: bool,
    expected: list[ChatMessage],
    d_msgs: int,
    d_turns: int,
) -> None:
    result = trim_conversation_to_recent_turns(messages, max_turns, crumb_present=crumb_present)
    assert list(result.messages) == expected
    assert (result.dropped_messages, result.dropped_turns) == (d_msgs, d_turns)
    assert result.tokens_before == estimate_history_tokens(messages)
    assert result.tokens_after == estimate_history_tokens(expected)


# ---------------------------------------------------------------- breadcrumb


def test_breadcrumb_message_is_a_flagged_user_note() -> None:
    message = breadcrumb_message()
    assert (message.role, message.content, message.is_breadcrumb) == ("user", BREADCRUMB_TEXT, True)
    assert message.tokens == 17  # ceil(49 / 4) + 4


@pytest.mark.parametrize(
    ("messages", "crumb_present", "inserted", "crumb_at"),
    [
        ([S, S2, U1], False, True, 2),
        ([U1, A1], False, True, 0),
        ([], False, True, 0),
        ([S, U1], True, False, None),
        ([S, breadcrumb_message(), U1], False, False, 1),
        ([S, user(BREADCRUMB_TEXT), A1], False, True, 1),
    ],
    ids=[
        "after every leading system row",
        "at the front without system rows",
        "into an empty history",
        "crumb_present: no second crumb",
        "a flagged crumb already there: no stacking",
        "text that reads like the crumb is not one",
    ],
)
def test_insert_breadcrumb(
    messages: list[ChatMessage], crumb_present: bool, inserted: bool, crumb_at: int | None
) -> None:
    history = list(messages)
    pure = with_breadcrumb(messages, crumb_present=crumb_present)
    assert insert_breadcrumb(history, crumb_present) is inserted
    assert tuple(history) == pure
    assert len(history) == len(messages) + inserted
    flagged = [i for i, m in enumerate(history) if m.is_breadcrumb]
    assert flagged == ([] if crumb_at is None else [crumb_at])


# ---------------------------------------------------------------- properties


def _prefix(messages: Sequence[ChatMessage], crumb_present: bool) -> int:
    s = leading_system_count(messages)
    return s + 1 if s < len(messages) and (crumb_present or messages[s].is_breadcrumb) else s


def reference_trim(
    messages: list[ChatMessage], budget: int, crumb_present: bool
) -> list[ChatMessage]:
    """The contract written the obvious way: try cuts oldest first, re-estimating each."""
    p = _prefix(messages, crumb_present)
    starts = turn_starts(messages, p)
    if budget <= 0 or len(starts) <= 1 or estimate_history_tokens(messages) <= budget:
        return messages
    for start in starts[1:]:
        candidate = messages[:p] + messages[start:]
        if estimate_history_tokens(candidate) <= budget:
            return candidate
    return messages[:p] + messages[starts[-1] :]


def assert_whole_turns(messages: list[ChatMessage], result: TrimResult, p: int) -> None:
    assert result.messages[:p] == tuple(messages[:p]), "system prefix and crumb kept"
    cuts = [p, *turn_starts(messages, p)]
    assert any(result.messages[p:] == tuple(messages[c:]) for c in cuts), "a turn was split"
    starts = turn_starts(messages, p)
    if starts:
        newest = tuple(messages[starts[-1] :])
        assert result.messages[len(result.messages) - len(newest) :] == newest
    assert remove_orphaned_tool_messages(result.messages) == result.messages


@given(histories(), st.integers(min_value=0, max_value=400))
def test_token_trim_matches_the_contract(
    history: tuple[list[ChatMessage], bool], budget: int
) -> None:
    messages, crumb_present = history
    result = trim_to_recent_turns(messages, budget, crumb_present=crumb_present)
    assert list(result.messages) == reference_trim(messages, budget, crumb_present)
    p = _prefix(messages, crumb_present)
    assert_whole_turns(messages, result, p)
    assert result.tokens_before == estimate_history_tokens(messages)
    assert result.tokens_after == estimate_history_tokens(result.messages)
    assert result.kept_turns == len(turn_starts(list(result.messages), p))
    assert result.kept_turns + result.dropped_turns == len(turn_starts(messages, p))
    counted = [m for m in messages if m.role != "system" and not m.is_breadcrumb]
    kept_counted = [m for m in result.messages if m.role != "system" and not m.is_breadcrumb]
    assert result.dropped_messages == len(counted) - len(kept_counted)
    again = trim_to_recent_turns(result.messages, budget, crumb_present=crumb_present)
    assert again.messages == result.messages, "not idempotent"


@given(histories(), st.integers(min_value=0, max_value=9))
def test_turn_count_trim_keeps_the_newest_turns(
    history: tuple[list[ChatMessage], bool], max_turns: int
) -> None:
    messages, crumb_present = history
    result = trim_to_recent_turn_count(messages, max_turns, crumb_present=crumb_present)
    p = _prefix(messages, crumb_present)
    starts = turn_starts(messages, p)
    keep = max(max_turns, 1)
    expected = messages if len(starts) <= keep else messages[:p] + messages[starts[-keep] :]
    assert list(result.messages) == expected
    assert_whole_turns(messages, result, p)
    assert result.tokens_before == estimate_history_tokens(messages)
    assert result.tokens_after == estimate_history_tokens(result.messages)
    assert result.kept_turns == min(len(starts), keep)
    again = trim_to_recent_turn_count(result.messages, max_turns, crumb_present=crumb_present)
    assert again.messages == result.messages


@given(histories(), st.integers(min_value=0, max_value=9))
def test_conversation_trim_keeps_turns_and_hoists_system_rows(
    history: tuple[list[ChatMessage], bool], max_turns: int
) -> None:
    messages, crumb_present = history
    result = trim_conversation_to_recent_turns(messages, max_turns, crumb_present=crumb_present)
    systems = [m for m in messages if m.role == "system"]
    if not result.trimmed:
        assert list(result.messages) == messages
        return
    out = list(result.messages)
    assert out[: len(systems)] == systems
    rest = out[len(systems) :]
    assert not any(m.is_breadcrumb or m.role == "system" for m in rest)
    assert len(turn_starts(rest)) == max(max_turns, 1)
    assert rest[0].role == "user"
    assert remove_orphaned_tool_messages(out) == result.messages
    assert result.tokens_before == estimate_history_tokens(messages)

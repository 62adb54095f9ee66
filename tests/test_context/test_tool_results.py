from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.context.tokens import compute_message_tokens
from bot.context.tool_results import (
    shrink_old_tool_results,
    summarize_arguments,
    truncate_tool_result,
)
from bot.domain.ids import Locale
from bot.domain.messages import ChatMessage, ToolCall
from tests.test_context.histories import assistant, tool, user

NOTE = "\n\n[... {} characters truncated ...]\n\n"
DIGITS = "0123456789" * 3  # 30 characters


@pytest.mark.parametrize(
    ("text", "max_chars", "expected"),
    [
        (DIGITS, 0, DIGITS),
        (DIGITS, 30, DIGITS),
        (DIGITS, 31, DIGITS),
        (DIGITS, 9, "012345" + NOTE.format(21) + "789"),
        (DIGITS, 10, "012345" + NOTE.format(20) + "6789"),
        ("ab[IMAGE:/x.png]" + "c" * 20, 12, "ab" + NOTE.format(30) + "cccc"),
        ("a" * 20 + "[IMAGE:/y.png]zz", 12, "aaaaaaaa" + NOTE.format(26) + "zz"),
        ("a" * 60 + "[IMAGE:/y.png]zz", 48, "a" * 32 + NOTE.format(28) + "[IMAGE:/y.png]zz"),
        ("abc[IMAGE:/never-closed" + "d" * 10, 12, "abc" + NOTE.format(30) + ""),
        ("[IMAGE:/a.png]" + "e" * 30, 21, "[IMAGE:/a.png]" + NOTE.format(23) + "eeeeeee"),
    ],
    ids=[
        "0 turns the cap off",
        "exactly at the cap",
        "under the cap",
        "head 2/3 and tail 1/3",
        "N counts removed characters",
        "head cut inside a marker moves before it",
        "tail cut inside a marker moves after it",
        "a tail cut at the marker start keeps it whole",
        "an unclosed marker runs to the end",
        "marker ending exactly at the head cut stays",
    ],
)
def test_truncate_tool_result(text: str, max_chars: int, expected: str) -> None:
    assert truncate_tool_result(text, max_chars) == expected


LONG = "E_TIMEOUT: " + "r" * 289  # 300 characters, an error code up front
ARGS_LONG = json.dumps({"query": "q" * 250, "n": 3, "tags": ["t" * 201, "ok"]})


@pytest.mark.parametrize(
    ("content", "locale", "expected"),
    [
        (LONG, "zh", LONG[:200] + "…(已省略 100 字)"),
        (LONG, "en", LONG[:200] + "…(100 chars omitted)"),
        ("x" * 200, "zh", "x" * 200),
        ("短" * 201, "zh", "短" * 200 + "…(已省略 1 字)"),
    ],
    ids=["zh note", "en note", "200 characters stay", "characters, not bytes"],
)
def test_old_results_shrink_to_their_head(content: str, locale: Locale, expected: str) -> None:
    old = tool("a", content, is_error=True)
    messages = [user(), assistant("", "a"), old, assistant(), user()]
    out = shrink_old_tool_results(messages, current_turn_start=4, locale=locale)
    assert out[2].content == expected
    assert out[2].content.startswith("E_TIMEOUT" if content is LONG else content[:1])
    assert out[2].is_error
    assert (out[2].tool_call_id, out[2].name) == ("a", "f")
    expected_tokens = None if expected == content else compute_message_tokens(out[2])
    assert out[2].tokens == expected_tokens


def test_the_current_turn_goes_in_full() -> None:
    calls = (ToolCall(id="a", name="search", arguments=ARGS_LONG),)
    messages = [
        user(),
        ChatMessage(role="assistant", tool_calls=calls),
        tool("a", LONG),
        assistant(),
        user(),
        ChatMessage(role="assistant", tool_calls=calls),
        tool("a", LONG),
    ]
    out = shrink_old_tool_results(messages, current_turn_start=4, locale="en")
    assert out[4:] == tuple(messages[4:])
    assert out[2].content.endswith("…(100 chars omitted)")
    summary = json.loads(out[1].tool_calls[0].arguments)
    assert summary == {
        "query": "q" * 200 + "…(50 chars omitted)",
        "n": 3,
        "tags": ["t" * 200 + "…(1 chars omitted)", "ok"],
    }
    assert out[1].tool_calls[0].name == "search"
    assert out[1].tokens == compute_message_tokens(out[1])


def test_shrinking_is_stable_call_after_call() -> None:
    messages = [user(), assistant("", "a"), tool("a", LONG), user()]
    once = shrink_old_tool_results(messages, current_turn_start=3, locale="zh")
    assert shrink_old_tool_results(messages, current_turn_start=3, locale="zh") == once


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"q": "short",  "n": 1}', '{"q": "short",  "n": 1}'),
        ('{"q": "' + "中" * 201 + '"}', '{"q": "' + "中" * 200 + '…(1 chars omitted)"}'),
        (
            "not json " + "z" * 300,
            json.dumps("not json " + "z" * 191 + "…(109 chars omitted)", ensure_ascii=False),
        ),
        ("not json", "not json"),
    ],
    ids=[
        "nothing long: byte for byte",
        "non-ASCII kept as written",
        "long non-JSON becomes a JSON string",
        "short non-JSON as is",
    ],
)
def test_argument_summary_is_valid_json(arguments: str, expected: str) -> None:
    assert summarize_arguments(arguments, "en") == expected


@pytest.mark.parametrize("start", [-3, 0, 99], ids=["negative", "zero", "past the end"])
def test_current_turn_start_is_clamped(start: int) -> None:
    messages = [user(), assistant("", "a"), tool("a", LONG)]
    out = shrink_old_tool_results(messages, current_turn_start=start, locale="en")
    assert len(out) == 3
    assert (out[2].content == LONG) == (start <= 0)


@given(
    st.lists(st.sampled_from(["abc ", "[IMAGE:/p.png]", "中文", "\n"]), max_size=30),
    st.integers(min_value=1, max_value=80),
)
def test_truncation_never_splits_a_marker(chunks: list[str], max_chars: int) -> None:
    text = "".join(chunks)
    out = truncate_tool_result(text, max_chars)
    if len(text) <= max_chars:
        assert out == text
        return
    match = re.fullmatch(r"(.*)\n\n\[\.\.\. (\d+) characters truncated \.\.\.\]\n\n(.*)", out, re.S)
    assert match is not None
    head, removed, tail = match.groups()
    assert text.startswith(head)
    assert text.endswith(tail)
    assert len(head) + int(removed) + len(tail) == len(text)
    assert len(head) <= max_chars * 2 // 3
    assert len(tail) <= max_chars - max_chars * 2 // 3
    for part in (head, tail):
        assert part.count("[IMAGE:") == part.count(".png]")

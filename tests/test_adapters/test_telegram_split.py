"""`split_text`: Telegram's 4,096 UTF-16 unit limit, best boundaries, whole characters."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.telegram.graphemes import is_grapheme_boundary
from adapters.telegram.markdown_entities import TELEGRAM_TEXT_LIMIT, plan_bubbles
from adapters.telegram.text_units import utf16_len

FAMILY = "👨‍👩‍👧"  # 8 UTF-16 units, 5 code points, 1 grapheme


def split_text(text: str, limit: int = TELEGRAM_TEXT_LIMIT) -> tuple[str, ...]:
    """What each bubble shows, for text without Markdown."""
    return tuple(bubble.text for bubble in plan_bubbles(text, limit))


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("", 4096, ()),
        ("  \n\n ", 4096, ()),
        ("hello", 4096, ("hello",)),
        ("a" * 4096, 4096, ("a" * 4096,)),
        ("a" * 4097, 4096, ("a" * 4096, "a")),
        ("𝕏" * 2048, 4096, ("𝕏" * 2048,)),
        ("𝕏" * 2049, 4096, ("𝕏" * 2048, "𝕏")),
        ("one two.\n\nthree four", 16, ("one two.", "three four")),
        ("aaaa\nbbbb cccc dd", 12, ("aaaa\nbbbb", "cccc dd")),
        ("First one. Second one here", 20, ("First one.", "Second one here")),
        ("第一句话。第二句话很长", 8, ("第一句话。", "第二句话很长")),
        ("short\n\nthen a much longer paragraph", 30, ("short\n\nthen a much longer", "paragraph")),
        ("ab" + FAMILY + "cd", 8, ("ab", FAMILY, "cd")),
        ("🇨🇳🇯🇵", 6, ("🇨🇳", "🇯🇵")),
        ("e\u0301" * 3, 3, ("e\u0301", "e\u0301", "e\u0301")),
    ],
    ids=[
        "empty",
        "blank",
        "short",
        "exactly-4096",
        "4097",
        "astral-exactly-4096-units",
        "astral-one-over",
        "paragraph",
        "line-before-word",
        "sentence",
        "cjk-sentence",
        "paragraph-too-early-uses-word",
        "zwj-family-kept-whole",
        "flag-pairs-kept-whole",
        "combining-marks",
    ],
)
def test_split_cases(text: str, limit: int, expected: tuple[str, ...]) -> None:
    assert split_text(text, limit) == expected


def test_a_10k_word_without_spaces_is_cut_hard_into_full_bubbles() -> None:
    word = "x" * 10_000
    assert split_text(word) == ("x" * 4096, "x" * 4096, "x" * 1808)


def test_paragraphs_are_preferred_over_lines_and_words() -> None:
    para = ("word " * 700).strip()  # 3,499 chars
    text = f"{para}\n\n{para}\n\n{para}"
    assert split_text(text) == (para, para, para)


def test_emoji_text_counts_utf16_units_not_code_points() -> None:
    text = "😀" * 3000  # 3,000 code points but 6,000 UTF-16 units
    bubbles = split_text(text)
    assert [len(b) for b in bubbles] == [2048, 952]
    assert all(utf16_len(b) <= 4096 for b in bubbles)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["a", "b", " ", "\n", "\n\n", "。", ". ", "𝕏", FAMILY, "🇨🇳", "e\u0301", "字"]
        ),
        max_size=120,
    ),
    st.integers(min_value=8, max_value=40),
)
def test_bubbles_fit_keep_graphemes_and_lose_only_whitespace(parts: list[str], limit: int) -> None:
    text = "".join(parts)
    bubbles = split_text(text, limit)
    assert all(utf16_len(b) <= limit for b in bubbles)
    assert all(b and b == b.strip() for b in bubbles)
    assert "".join("".join(b.split()) for b in bubbles) == "".join(text.split())
    squeezed = "".join(text.split())
    offset = 0
    for bubble in bubbles:
        offset += len("".join(bubble.split()))
        assert is_grapheme_boundary(squeezed, offset) or offset == len(squeezed)

"""The model's Markdown as Telegram text + entities (UTF-16), and bubbles that keep them whole."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.telegram.markdown_entities import (
    Bubble,
    Entity,
    plan_bubbles,
)
from adapters.telegram.text_units import utf16_len, utf16_slice

FAMILY = "👨‍👩‍👧"  # 8 UTF-16 units, one grapheme


def format_markdown(source: str) -> tuple[str, tuple[Entity, ...]]:
    """The whole rendered text and its entities: the one bubble of an unbounded limit."""
    bubbles = plan_bubbles(source, limit=10**9)
    if not bubbles:
        return "", ()
    (whole,) = bubbles
    return whole.text, whole.entities


def shown(text: str, entities: tuple[Entity, ...]) -> list[tuple[str, str, dict[str, Any]]]:
    """(type, the text the entity covers, extras) for each entity, in order."""
    out = []
    for entity in entities:
        extras = {k: v for k, v in entity.to_api().items() if k in ("url", "language")}
        out.append((entity.type, utf16_slice(text, entity.offset, entity.length), extras))
    return out


@pytest.mark.parametrize(
    ("markdown", "text", "entities"),
    [
        ("**bold** and *it*", "bold and it", [("bold", "bold", {}), ("italic", "it", {})]),
        ("***both***", "both", [("bold", "both", {}), ("italic", "both", {})]),
        (
            "**bold _inner_ end**",
            "bold inner end",
            [("bold", "bold inner end", {}), ("italic", "inner", {})],
        ),
        ("~~gone~~ __bold__", "gone bold", [("strikethrough", "gone", {}), ("bold", "bold", {})]),
        ("run `x = 1` now", "run x = 1 now", [("code", "x = 1", {})]),
        (
            "see [the docs](https://example.com/a_b?q=1)",
            "see the docs",
            [("text_link", "the docs", {"url": "https://example.com/a_b?q=1"})],
        ),
        ("<https://example.com>", "https://example.com", []),
        ("[`f()`](https://x.io) here", "f() here", [("text_link", "f()", {"url": "https://x.io"})]),
        ("[relative](docs/x.md) link", "relative link", []),
        ("## Plan\nstep one", "Plan\n\nstep one", [("bold", "Plan", {})]),
        ("- one\n- two\n  - deeper", "• one\n• two\n   • deeper", []),
        ("3. three\n4. four", "3. three\n4. four", []),
        ("> quoted **words**\n> more", "quoted words\nmore",
         [("blockquote", "quoted words\nmore", {}), ("bold", "words", {})]),
        ("the answer is ||42||!", "the answer is 42!", [("spoiler", "42", {})]),
        ("a || b, no spoiler", "a || b, no spoiler", []),
        (
            "```python\ndef f():\n    return 1\n```",
            "def f():\n    return 1",
            [("pre", "def f():\n    return 1", {"language": "python"})],
        ),
        ("```\nplain\n```", "plain", [("pre", "plain", {})]),
        ("2 * 3 * 4 = 24, snake_case_name", "2 * 3 * 4 = 24, snake_case_name", []),
        ("a\\*b\\* &amp; <b>", "a*b* & <b>", []),
        ("first\n\n---\n\nsecond", "first\n\n———\n\nsecond", []),
        ("before\n\n```\n```\n\nafter", "before\n\nafter", []),
        (
            "| name | **n** |\n|---|--:|\n| apples | 3 |\n| 字 | 12 |",
            "name   | n\n-------+---\napples | 3\n字      | 12",
            [("pre", "name   | n\n-------+---\napples | 3\n字      | 12", {})],
        ),
    ],
    ids=[
        "bold-italic",
        "nested-same-run",
        "nested-inside",
        "strike-and-underscore-bold",
        "inline-code",
        "link",
        "autolink-shows-itself",
        "code-in-link-gives-way",
        "relative-link-stays-text",
        "heading-bold",
        "bullets",
        "ordered-keeps-start",
        "blockquote",
        "spoiler",
        "lone-bars",
        "fenced-code-language",
        "fenced-code-plain",
        "not-markdown",
        "escapes-and-references",
        "rule",
        "empty-code-block",
        "table-as-aligned-rows",
    ],
)  # fmt: skip
def test_markdown_becomes_text_and_entities(
    markdown: str, text: str, entities: list[tuple[str, str, dict[str, Any]]]
) -> None:
    rendered, found = format_markdown(markdown)
    assert rendered == text
    assert shown(rendered, found) == entities


def test_offsets_count_utf16_units_for_cjk_and_astral_emoji() -> None:
    text, entities = format_markdown(f"😀 **粗体** {FAMILY} *斜体* 𝕏 `代码`")
    assert text == f"😀 粗体 {FAMILY} 斜体 𝕏 代码"
    assert [e.to_api() for e in entities] == [
        {"type": "bold", "offset": 3, "length": 2},  # 😀 is two units
        {"type": "italic", "offset": 15, "length": 2},  # + "粗体 " 3 + family 8 + " " 1
        {"type": "code", "offset": 21, "length": 2},  # + "斜体 " 3 + 𝕏 2 + " " 1
    ]
    assert shown(text, entities) == [
        ("bold", "粗体", {}),
        ("italic", "斜体", {}),
        ("code", "代码", {}),
    ]


def test_blank_markdown_gives_no_bubbles() -> None:
    assert plan_bubbles("") == ()
    assert plan_bubbles("  \n\n ") == ()


def test_a_short_reply_is_one_bubble_whose_source_is_the_markdown() -> None:
    markdown = "# Result\n\n**Done** — see `main.py`:\n\n```py\nprint('hi')\n```"
    (bubble,) = plan_bubbles(markdown)
    assert bubble.source == markdown
    assert bubble.text == "Result\n\nDone — see main.py:\n\nprint('hi')"
    assert [e.type for e in bubble.entities] == ["bold", "bold", "code", "pre"]


def check_bubble(bubble: Bubble, limit: int) -> None:
    """What Telegram demands of every bubble we send."""
    assert 0 < utf16_len(bubble.text) <= limit
    assert bubble.text == bubble.text.rstrip()
    code_first = any(e.type == "pre" and e.offset == 0 for e in bubble.entities)
    assert bubble.text == bubble.text.lstrip() or code_first  # a code line keeps its indent
    for entity in bubble.entities:
        assert entity.length > 0
        assert entity.offset + entity.length <= utf16_len(bubble.text)
        assert utf16_slice(bubble.text, entity.offset, entity.length).strip()


def test_a_bold_run_across_the_4096_boundary_becomes_one_entity_per_bubble() -> None:
    words = " ".join(f"word{n}" for n in range(1000))  # 6,889 characters, one paragraph
    bubbles = plan_bubbles(f"intro **{words}** outro")
    assert len(bubbles) == 2
    for bubble in bubbles:
        check_bubble(bubble, 4096)
    first, second = bubbles
    assert first.text.startswith("intro word0 ")
    (bold1,) = first.entities
    assert (bold1.type, bold1.offset, bold1.length) == ("bold", 6, utf16_len(first.text) - 6)
    (bold2,) = second.entities
    assert (bold2.type, bold2.offset) == ("bold", 0)
    assert utf16_slice(second.text, 0, bold2.length) + " outro" == second.text
    assert f"{first.text} {second.text}" == f"intro {words} outro"


def test_astral_emoji_bubbles_are_measured_and_clipped_in_utf16_units() -> None:
    run = " ".join(["😀😀😀"] * 1200)  # 3 astral emoji = 6 units per word: 8,399 units
    bubbles = plan_bubbles(f"~~{run}~~")
    assert len(bubbles) == 3
    for bubble in bubbles:
        check_bubble(bubble, 4096)
        (strike,) = bubble.entities
        assert (strike.type, strike.offset, strike.length) == (
            "strikethrough",
            0,
            utf16_len(bubble.text),
        )
    assert " ".join(b.text for b in bubbles) == run


def test_cjk_text_splits_at_sentences_and_keeps_offsets() -> None:
    sentence = "这是一个**很长**的句子。"  # 10 characters shown
    bubbles = plan_bubbles(sentence * 450)  # 4,500 characters, no spaces or newlines
    assert [len(b.text) for b in bubbles] == [4090, 410]  # 409 and 41 whole sentences
    for bubble in bubbles:
        check_bubble(bubble, 4096)
        assert bubble.text.endswith("。")
        assert {utf16_slice(bubble.text, e.offset, e.length) for e in bubble.entities} == {"很长"}
    assert [len(b.entities) for b in bubbles] == [409, 41]
    assert [b.entities[1].offset for b in bubbles] == [14, 14]


def test_a_code_block_that_would_cross_the_boundary_moves_to_the_next_bubble_whole() -> None:
    prose = ("Some prose here. " * 200).strip()  # 3,399 characters
    code = "\n".join(f"line_{n} = {n}" for n in range(80))  # 1,049 characters
    markdown = f"{prose}\n\n```python\n{code}\n```\n\nAfter."
    first, second = plan_bubbles(markdown)
    assert first.text == prose
    assert first.entities == ()
    assert first.source == prose
    assert second.text == f"{code}\n\nAfter."
    assert [e.to_api() for e in second.entities] == [
        {"type": "pre", "offset": 0, "length": utf16_len(code), "language": "python"}
    ]
    assert second.source == f"```python\n{code}\n```\n\nAfter."


def test_a_code_block_longer_than_a_bubble_is_cut_between_lines_each_part_still_code() -> None:
    lines = [f"    value_{n:04d} = compute({n}, 'x' * {n % 7})" for n in range(300)]
    code = "\n".join(lines)  # 11,589 characters of indented code
    bubbles = plan_bubbles(f"Here it is:\n\n```py\n{code}\n```")
    assert len(bubbles) == 3
    intro = "Here it is:\n\n"
    assert bubbles[0].text.startswith(intro)
    parts = [bubbles[0].text.removeprefix(intro), *(b.text for b in bubbles[1:])]
    for bubble, part in zip(bubbles, parts, strict=True):
        check_bubble(bubble, 4096)
        (pre,) = bubble.entities
        assert pre.to_api() == {
            "type": "pre",
            "offset": utf16_len(bubble.text) - utf16_len(part),
            "length": utf16_len(part),
            "language": "py",
        }
    assert [line for part in parts for line in part.split("\n")] == lines


def test_blocks_are_preferred_and_each_bubble_carries_its_own_markdown() -> None:
    para = " ".join(f"**w{n}**" for n in range(500))  # 3,390 characters shown
    markdown = f"{para}\n\n- {para}\n\n> {para}"
    bubbles = plan_bubbles(markdown)
    assert [b.source for b in bubbles] == [para, f"- {para}", f"> {para}"]
    assert [len(b.entities) for b in bubbles] == [500, 500, 501]
    assert bubbles[2].entities[0].type == "blockquote"


def test_a_single_long_word_is_cut_hard_between_graphemes() -> None:
    bubbles = plan_bubbles(f"**{FAMILY * 600}**")  # 4,800 units, no boundary at all
    assert [utf16_len(b.text) for b in bubbles] == [4096, 704]
    assert all(b.text == FAMILY * (utf16_len(b.text) // 8) for b in bubbles)
    assert [b.entities[0].length for b in bubbles] == [4096, 704]


PIECES = [
    "word", " ", "\n", "\n\n", "**", "*", "~~", "`", "||", "。", ". ", "😀", FAMILY, "字",
    "[a](https://x.io)", "\n```py\nx = 1\n  y\n```\n", "- ", "> ", "# ",
    "\n| a | b |\n|---|---|\n| 1 | 2 |\n",
]  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=150), st.integers(min_value=12, max_value=60))
def test_any_markdown_gives_bubbles_telegram_accepts_and_loses_no_text(
    parts: list[str], limit: int
) -> None:
    markdown = "".join(parts)
    whole, _ = format_markdown(markdown)
    bubbles = plan_bubbles(markdown, limit)
    for bubble in bubbles:
        check_bubble(bubble, limit)
    squeezed = "".join(whole.split())
    assert "".join("".join(b.text.split()) for b in bubbles) == squeezed

"""Which characters read as `;` `:` `[` `]`: NFKC first, then category, then the table."""

from __future__ import annotations

import pytest

from bot.context.confusables import lookalike, opens_like_a_bracket

READS_AS = [
    # NFKC folds them into ours
    ("\u037e", ";"),  # GREEK QUESTION MARK
    ("\uff1b", ";"),  # FULLWIDTH SEMICOLON
    ("\ufe54", ";"),  # SMALL SEMICOLON
    ("\ufe14", ";"),  # PRESENTATION FORM FOR VERTICAL SEMICOLON
    ("\uff1a", ":"),  # FULLWIDTH COLON
    ("\ufe55", ":"),  # SMALL COLON
    ("\ufe13", ":"),  # PRESENTATION FORM FOR VERTICAL COLON
    ("\uff3b", "["),  # FULLWIDTH LEFT SQUARE BRACKET
    ("\ufe47", "["),  # PRESENTATION FORM FOR VERTICAL LEFT SQUARE BRACKET
    ("\uff3d", "]"),
    # the category says bracket
    ("⁅", "["),
    ("⟦", "["),
    ("〔", "["),
    ("﹝", "["),
    ("⦃", "["),
    ("⦋", "["),
    ("【", "["),
    ("〚", "["),
    ("⌈", "["),
    ("❲", "["),
    ("⁆", "]"),
    ("⟧", "]"),
    ("〕", "]"),
    ("﹞", "]"),
    ("⦄", "]"),
    ("】", "]"),
    # the table: drawn as ours, no category says so
    ("\ua789", ":"),  # MODIFIER LETTER COLON
    ("\u02d0", ":"),  # MODIFIER LETTER TRIANGULAR COLON
    ("\u0903", ":"),  # DEVANAGARI SIGN VISARGA
    ("\u2236", ":"),  # RATIO
    ("\u0589", ":"),  # ARMENIAN FULL STOP
    ("\u05c3", ":"),  # HEBREW PUNCTUATION SOF PASUQ
    ("\ua4fd", ":"),  # LISU LETTER TONE MYA JEU
    ("\u061b", ";"),  # ARABIC SEMICOLON
    ("\u204f", ";"),  # REVERSED SEMICOLON
    ("\u2e35", ";"),  # TURNED SEMICOLON
    ("\u1364", ";"),  # ETHIOPIC SEMICOLON
    ("\u23a1", "["),  # LEFT SQUARE BRACKET UPPER CORNER
    ("\u228f", "["),  # SQUARE IMAGE OF
    ("\u23a6", "]"),
]

EVERYDAY = "(){}（）｛｝﹛《》〈〉「」『』„‚“”⦅⦆<>"
PLAIN = "aZ9 .,!?-_'\"/\\·•…—、。，！？：张三𝒜"


@pytest.mark.parametrize(("char", "mark"), READS_AS, ids=[f"U+{ord(c):04X}" for c, _ in READS_AS])
def test_look_alikes_read_as_ours(char: str, mark: str) -> None:
    assert lookalike(char) == mark
    assert opens_like_a_bracket(char) is (mark == "[")


@pytest.mark.parametrize("char", EVERYDAY, ids=lambda c: f"U+{ord(c):04X}")
def test_everyday_brackets_read_as_themselves(char: str) -> None:
    assert lookalike(char) is None


@pytest.mark.parametrize("char", [c for c in PLAIN if c != "："], ids=lambda c: f"U+{ord(c):04X}")
def test_other_characters_read_as_themselves(char: str) -> None:
    assert lookalike(char) is None


@pytest.mark.parametrize("mark", ";:[]")
def test_ours_are_ours(mark: str) -> None:
    assert lookalike(mark) == mark

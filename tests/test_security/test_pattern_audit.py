"""Finding 28.1, the general rule: every regular expression in bot/, adapters/ and storage/
runs in linear time on any text (member or model text may reach any of them).

Each module-level compiled pattern is found by importing every module, so a pattern added
later is audited without anyone listing it. Fragments built from the pattern's own
characters (the classic way to make nested or overlapping quantifiers backtrack) are pumped
thousands of times: every piece alone at full length, then Hypothesis's compositions of
pieces with a head and a tail. `search`, `match`, `findall` and `sub` must finish within a
bound a linear pattern meets by orders of magnitude.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.test_security.bounded import within

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("bot", "adapters", "storage")
BOUND_S = 5.0


def _patterns() -> dict[str, re.Pattern[str]]:
    found: dict[str, re.Pattern[str]] = {}
    for package in PACKAGES:
        for module_info in pkgutil.walk_packages([str(ROOT / package)], prefix=f"{package}."):
            if ".migrations" in module_info.name:
                continue  # alembic scripts, run only by alembic; they hold no patterns
            module = importlib.import_module(module_info.name)
            for name, value in vars(module).items():
                if isinstance(value, re.Pattern) and isinstance(value.pattern, str):
                    found[f"{module_info.name}.{name}"] = value
    return found


PATTERNS = _patterns()


def test_the_audit_sees_the_patterns_it_should() -> None:
    assert "adapters.llm.scripted._HEADER_LINE" in PATTERNS
    assert "bot.context.compaction._HEADER" in PATTERNS
    assert len(PATTERNS) >= 15


def _alphabet(pattern: re.Pattern[str]) -> list[str]:
    """Single characters of the pattern's source, and its words with the punctuation that
    tends to follow them (`id` → `id:`, `id;`), plus the usual suspects."""
    source = pattern.pattern
    literal = sorted({c for c in source if c.isprintable() and c != "\\"})
    words = sorted(set(re.findall(r"[A-Za-z_]{2,}", source)))
    suffixed = [word + end for word in words for end in (":", ";", " ")]
    common = [" ", "\t", "\n", "\r", "\u200b", "a", "1", "m1", "id:", "[", "]", ";"]
    return [*literal, *words, *suffixed, *common]


MAX_REPEATS = 4_000


def _scan(pattern: re.Pattern[str], text: str) -> None:
    with within(BOUND_S):
        pattern.search(text)
        pattern.match(text)
        pattern.findall(text)
        pattern.sub("", text)


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_pattern_is_linear_on_every_piece_pumped(name: str) -> None:
    """Each piece of the alphabet on its own, repeated the most times: the loop that pumps
    `(a+)+`-like nesting or a quadratic scan is often a single character or word, and
    here every one of them is tried at full length rather than left to chance."""
    pattern = PATTERNS[name]
    for piece in _alphabet(pattern):
        _scan(pattern, piece * MAX_REPEATS)


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_pattern_is_linear_on_pumped_text(name: str) -> None:
    """Loops of two or three pieces, with a head and a tail that may start or spoil a
    match; single-piece loops at full length are the test above."""
    pattern = PATTERNS[name]
    pieces = st.sampled_from(_alphabet(pattern))

    @settings(max_examples=100, deadline=None, database=None)
    @given(
        st.lists(pieces, max_size=2).map("".join),
        st.lists(pieces, min_size=1, max_size=3).map("".join),
        st.integers(min_value=50, max_value=MAX_REPEATS),
        st.lists(pieces, max_size=3).map("".join),
    )
    def pumped(head: str, loop: str, repeats: int, tail: str) -> None:
        _scan(pattern, head + loop * repeats + tail)

    pumped()

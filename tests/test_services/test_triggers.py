"""Wake words (`keywords`, `patterns`) and the loop guard against other bots."""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime, timedelta

import pytest

from bot.services.triggers import (
    PATTERN_SCAN_CHARS,
    BotLoopGuard,
    UnsafePattern,
    check_linear,
    compile_wake_words,
)


@pytest.mark.parametrize(
    ("text", "hit"),
    [
        ("hey BOT, what time is it", "bot"),
        ("Bot?", "bot"),
        ("robots are coming", None),
        ("the bottom line", None),
        ("bot_helper said", None),
        ("问bot吧", "bot"),  # a neighbour in an unspaced script is a boundary
        ("问问机器人吧", "机器人"),  # an unspaced keyword matches inside a sentence
        ("机器 人", None),
        ("ÉCOLE ouverte", "école"),
    ],
)
def test_keywords_match_whole_words_in_any_case_and_script(text: str, hit: str | None) -> None:
    words = compile_wake_words(("Bot", "机器人", "École"), ())
    assert words.match(text) == hit


@pytest.mark.parametrize(
    "pattern",
    [
        r"(a+)+$",
        r"(a*)*b",
        r"(a|a)*$",
        r"(\w+\s?)*$",
        r"a*a*$",
        r".*x.*y",
        r"\d+\d+",
        r"(a)\1",
        r"(?=deploy)",
        r"(?<!no )deploy",
        r"(x{2,}){3,}",
        r"([a-z]+)*@",
    ],
)
def test_patterns_that_can_backtrack_catastrophically_are_refused(pattern: str) -> None:
    with pytest.raises(UnsafePattern, match="pattern"):
        check_linear(pattern)


@pytest.mark.parametrize(
    "pattern",
    [
        r"\bdeploy\b",
        r"deploy.*prod",
        r"\bv\d+\.\d+",
        r"bug\s*#?\d+",
        r"(foo|bar)+",
        r"[ab]+c[ab]+",
        r"工单\s*\d+",
        r"^/?status$",
    ],
)
def test_ordinary_patterns_are_accepted(pattern: str) -> None:
    check_linear(pattern)


def test_a_pattern_matches_case_insensitively_and_a_near_miss_does_not() -> None:
    words = compile_wake_words((), (r"\bincident\s*#\d+",))
    assert words.match("new INCIDENT #42 in prod") is not None
    assert words.match("incidents #42") is None
    assert words.match("incident #x") is None


def test_a_broken_pattern_is_refused_with_the_reason() -> None:
    with pytest.raises(UnsafePattern, match="not a regular expression"):
        check_linear("(unclosed")


_ALPHABET = "aab  \t1#x.-_中Zé\n"
_ACCEPTED = [
    r"deploy.*prod",
    r"\bv\d+\.\d+",
    r"bug\s*#?\d+",
    r"(ab|b)+x",
    r"[a ]+#[a ]+\d",
    r"a.*$",
]


def test_fuzz_accepted_patterns_match_in_bounded_time() -> None:
    """Every accepted pattern against adversarial texts of the longest scanned length: each
    match stays far below what catastrophic backtracking takes (seconds to years)."""
    rng = random.Random(48)
    words = compile_wake_words((), tuple(_ACCEPTED))
    texts = ["a" * 4096, " " * 4096, "ab" * 2048]
    texts += ["".join(rng.choice(_ALPHABET) for _ in range(4096)) for _ in range(20)]
    worst = 0.0
    for text in texts:
        started = time.perf_counter()
        words.match(text + "!" * 10_000)  # beyond the scanned length: never looked at
        worst = max(worst, time.perf_counter() - started)
    # quadratic at worst on the 1,024 characters patterns read; a refused shape takes
    # minutes here
    assert worst < 5.0


def test_fuzz_random_patterns_either_refused_or_fast() -> None:
    """Random small patterns built from quantifiers, groups and classes: whatever the check
    accepts matches adversarial text quickly."""
    rng = random.Random(7)
    atoms = ["a", "b", r"\d", r"\s", ".", "[ab]", r"\w", "x"]
    quants = ["", "", "*", "+", "?", "{2}", "{1,3}"]
    accepted = 0
    for _ in range(600):
        parts = []
        for _ in range(rng.randint(1, 4)):
            atom = rng.choice(atoms)
            if rng.random() < 0.3:
                atom = f"({atom}{rng.choice(quants)}{rng.choice(atoms)})"
            parts.append(atom + rng.choice(quants))
        pattern = "".join(parts) + rng.choice(["", "$", "!"])
        try:
            compiled = check_linear(pattern)
        except UnsafePattern:
            continue
        accepted += 1
        text = "a" * 500 + "b" * 500 + " 1"
        started = time.perf_counter()
        compiled.search(text[:PATTERN_SCAN_CHARS])
        assert time.perf_counter() - started < 5.0, pattern
    assert accepted > 50


def test_the_loop_guard_stops_an_exchange_after_a_few_rounds_in_ten_minutes() -> None:
    guard = BotLoopGuard(rounds=3)
    start = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
    assert [guard.allows(-1, m, start + timedelta(minutes=m)) for m in (1, 2, 3, 4)] == [
        True,
        True,
        True,
        False,
    ]
    assert guard.allows(-1, 2, start + timedelta(minutes=4))  # asked again: same answer
    assert guard.allows(-2, 9, start + timedelta(minutes=4))  # another chat: its own count
    assert guard.allows(-1, 5, start + timedelta(minutes=12))  # the window moved on

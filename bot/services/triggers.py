"""Wake words: `keywords` and `patterns` that make a group message address the bot, and the
check that keeps a pattern from backtracking catastrophically (docs/groups.md, Triggers).

A keyword matches as a whole word, in any case: its neighbours in the text are not letters,
digits or `_`. Scripts written without spaces (Chinese, Japanese, Thai…) have no word
boundaries, so a keyword edge in such a script, or a neighbour in one, needs none ("机器人"
matches in "问问机器人吧"; "bot" matches in "问bot吧" but not in "robots").

A pattern is a Python regular expression, matched case-insensitively. Python's engine
backtracks, so a pattern is accepted only when its shape keeps matching linear in the text
(or, for a lone unbounded quantifier under `search`, quadratic in the first 1,024
characters, the part patterns look at): no backreferences, lookarounds or conditionals;
no quantifier inside a repeated group; no alternatives that start alike inside a repeat; no
two unbounded quantifiers that could take turns eating the same characters. Anything else
is refused at start-up with the reason (`UnsafePattern`).
"""

from __future__ import annotations

import importlib
import re
import unicodedata
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

_parser: Any = importlib.import_module("re._parser")
_c: Any = importlib.import_module("re._constants")

MAX_SCAN_CHARS = 4096
"""Text beyond this is not searched for keywords (Telegram's longest message)."""
PATTERN_SCAN_CHARS = 1024
"""Text beyond this is not searched with patterns: an accepted pattern is at worst quadratic
under `search` (a lone `.*` tried from every start), ~0.1 s here, not ~3 s at 4,096."""
_BOUNDED_AS_UNBOUNDED = 16
"""A repeat allowing more than this many is treated as unbounded."""
_SAMPLE = frozenset([chr(i) for i in range(128)] + list("éßЖ中あ한١\u00a0１\u2028𝔸"))
"""Representatives of every class a pattern names: two sets that share none of these are
taken as disjoint."""
_UNSPACED_SCRIPTS = (
    "CJK",
    "HIRAGANA",
    "KATAKANA",
    "THAI",
    "LAO",
    "KHMER",
    "MYANMAR",
    "TIBETAN",
    "YI ",
    "IDEOGRAPHIC",
)


class UnsafePattern(ValueError):
    """A wake-word pattern that does not compile or could backtrack catastrophically."""


# ------------------------------------------------------------------ keywords


def unspaced(char: str) -> bool:
    """Whether `char` is a letter of a script written without spaces between words."""
    if not unicodedata.category(char).startswith("L") or char.isascii():
        return False
    return unicodedata.name(char, "").startswith(_UNSPACED_SCRIPTS)


def _wordish(char: str) -> bool:
    return char == "_" or unicodedata.category(char)[0] in "LNM"


def keyword_in(keyword: str, text: str) -> bool:
    """Whether `keyword` (already case-folded) occurs in `text` (case-folded) as a word."""
    if not keyword:
        return False
    start = text.find(keyword)
    while start != -1:
        end = start + len(keyword)
        left_ok = (
            start == 0
            or unspaced(keyword[0])
            or not _wordish(text[start - 1])
            or unspaced(text[start - 1])
        )
        right_ok = (
            end == len(text)
            or unspaced(keyword[-1])
            or not _wordish(text[end])
            or unspaced(text[end])
        )
        if left_ok and right_ok:
            return True
        start = text.find(keyword, start + 1)
    return False


# ------------------------------------------------------------------ patterns


@dataclass(slots=True)
class _Shape:
    """What a walked piece can consume, whether it can consume nothing, and the unbounded
    repeats still 'live' after it (their characters not yet fenced off)."""

    chars: frozenset[str]
    nullable: bool


def _category(name: Any, char: str) -> bool:
    word = char == "_" or char.isalnum()
    table = {
        _c.CATEGORY_DIGIT: char.isdigit(),
        _c.CATEGORY_NOT_DIGIT: not char.isdigit(),
        _c.CATEGORY_SPACE: char.isspace(),
        _c.CATEGORY_NOT_SPACE: not char.isspace(),
        _c.CATEGORY_WORD: word,
        _c.CATEGORY_NOT_WORD: not word,
    }
    return bool(table.get(name, True))


def _in_set(items: Any, char: str) -> bool:
    negate = False
    hit = False
    folded = {char, char.lower(), char.upper()}
    for op, av in items:
        if op is _c.NEGATE:
            negate = True
        elif op is _c.LITERAL:
            hit = hit or chr(av) in folded
        elif op is _c.RANGE:
            hit = hit or any(av[0] <= ord(c) <= av[1] for c in folded)
        elif op is _c.CATEGORY:
            hit = hit or _category(av, char)
        else:  # a charset op we do not model: assume it matches (stricter)
            hit = True
    return hit != negate


class _Walker:
    def __init__(self, pattern: str) -> None:
        self.pattern = pattern

    def refuse(self, why: str) -> UnsafePattern:
        return UnsafePattern(f"pattern {self.pattern!r}: {why}")

    def sequence(
        self, items: Any, live: list[frozenset[str]], in_repeat: bool
    ) -> tuple[_Shape, list[frozenset[str]]]:
        chars: set[str] = set()
        nullable = True
        for item in items:
            shape, live = self.node(item, live, in_repeat)
            chars |= shape.chars
            nullable = nullable and shape.nullable
        return _Shape(frozenset(chars), nullable), live

    def node(
        self, item: Any, live: list[frozenset[str]], in_repeat: bool
    ) -> tuple[_Shape, list[frozenset[str]]]:
        op, av = item
        if op in (_c.GROUPREF, _c.GROUPREF_EXISTS):
            raise self.refuse(
                "backreferences are not allowed (they cannot be matched in linear time)"
            )
        if op in (_c.ASSERT, _c.ASSERT_NOT):
            raise self.refuse("lookarounds are not allowed (they cannot be matched in linear time)")
        if op is _c.AT:
            return _Shape(frozenset(), True), live
        if op in (_c.LITERAL, _c.NOT_LITERAL, _c.ANY, _c.IN, _c.CATEGORY):
            chars = frozenset(c for c in _SAMPLE if self.single(op, av, c))
            # a mandatory character none of the live repeats can take fences them off
            return _Shape(chars, False), [r for r in live if r & chars]
        if op is _c.SUBPATTERN:
            return self.sequence(av[-1], live, in_repeat)
        if op in (_c.ATOMIC_GROUP,):
            return self.sequence(av, live, in_repeat)
        if op is _c.BRANCH:
            return self.branch(av[1], live, in_repeat)
        if op in (_c.MAX_REPEAT, _c.MIN_REPEAT, _c.POSSESSIVE_REPEAT):
            return self.repeat(op, av, live, in_repeat)
        raise self.refuse(f"unsupported construct {op}")

    def single(self, op: Any, av: Any, char: str) -> bool:
        if op is _c.LITERAL:
            return chr(av) in {char, char.lower(), char.upper()}
        if op is _c.NOT_LITERAL:
            return chr(av) not in {char, char.lower(), char.upper()}
        if op is _c.ANY:
            return char != "\n"
        if op is _c.CATEGORY:
            return _category(av, char)
        return _in_set(av, char)

    def branch(
        self, branches: Any, live: list[frozenset[str]], in_repeat: bool
    ) -> tuple[_Shape, list[frozenset[str]]]:
        chars: set[str] = set()
        nullable = False
        out: list[frozenset[str]] = []
        firsts: list[frozenset[str]] = []
        for branch in branches:
            shape, after = self.sequence(branch, list(live), in_repeat)
            chars |= shape.chars
            nullable = nullable or shape.nullable
            out += [r for r in after if r not in out]
            firsts.append(self.first(branch))
        if in_repeat:
            for index, first in enumerate(firsts):
                if any(first & other for other in firsts[index + 1 :]) or not first:
                    raise self.refuse(
                        "alternatives inside a repeat must start with different characters "
                        "(overlapping ones backtrack exponentially)"
                    )
        return _Shape(frozenset(chars), nullable), out

    def first(self, items: Any) -> frozenset[str]:
        """The characters a sequence can start with (empty when it can be empty)."""
        found: set[str] = set()
        for item in items:
            shape, _ = self.node(item, [], False)
            op, av = item
            if op in (_c.MAX_REPEAT, _c.MIN_REPEAT, _c.POSSESSIVE_REPEAT):
                found |= self.first(av[2])
            elif op is _c.SUBPATTERN:
                found |= self.first(av[-1])
            else:
                found |= shape.chars
            if not shape.nullable:
                return frozenset(found)
        return frozenset()

    def repeat(
        self, op: Any, av: Any, live: list[frozenset[str]], in_repeat: bool
    ) -> tuple[_Shape, list[frozenset[str]]]:
        low, high, body = av
        repeats = high is _c.MAXREPEAT or high > 1
        if in_repeat:  # `(a+)+`, and `(a?a)*` too: an optional part is a choice per round
            raise self.refuse(
                "a quantifier inside a repeated group (nested quantifiers backtrack "
                "catastrophically)"
            )
        if not repeats:  # `x?`, `(…)?`: its inside is part of the sequence around it
            shape, after = self.sequence(body, list(live), in_repeat)
            if low == 0 or shape.nullable:  # skipped, nothing is fenced off
                after = [*live, *(r for r in after if r not in live)]
            return _Shape(shape.chars, low == 0 or shape.nullable), after
        shape, _ = self.sequence(body, [], True)
        nullable = low == 0 or shape.nullable
        unbounded = high is _c.MAXREPEAT or high > _BOUNDED_AS_UNBOUNDED
        if not unbounded:
            after = [r for r in live if r & shape.chars] if not nullable else live
            return _Shape(shape.chars, nullable), after
        if any(r & shape.chars for r in live):
            raise self.refuse(
                "two unbounded quantifiers can match the same characters with nothing "
                "that must come between them (they backtrack polynomially)"
            )
        return _Shape(shape.chars, nullable), [*live, shape.chars]


def check_linear(pattern: str) -> re.Pattern[str]:
    """`pattern` compiled (case-insensitive), or `UnsafePattern` saying why it is refused."""
    try:
        compiled = re.compile(pattern, re.IGNORECASE)
        parsed = _parser.parse(pattern, re.IGNORECASE)
    except re.error as exc:
        raise UnsafePattern(f"pattern {pattern!r}: not a regular expression: {exc}") from None
    if not pattern:
        raise UnsafePattern("pattern '': empty (it would match every message)")
    walker = _Walker(pattern)
    walker.sequence(list(parsed), [], False)
    return compiled


# ------------------------------------------------------------------ both


@dataclass(frozen=True, slots=True)
class WakeWords:
    """A chat's keywords (case-folded) and compiled patterns."""

    keywords: tuple[str, ...] = ()
    patterns: tuple[re.Pattern[str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.keywords or self.patterns)

    def match(self, text: str) -> str | None:
        """The keyword (in the first 4,096 characters) or pattern (in the first 1,024)
        that `text` matches."""
        if not text:
            return None
        folded = text[:MAX_SCAN_CHARS].casefold()
        for keyword in self.keywords:
            if keyword_in(keyword, folded):
                return keyword
        scanned = text[:PATTERN_SCAN_CHARS]
        for pattern in self.patterns:
            if pattern.search(scanned) is not None:
                return pattern.pattern
        return None


@lru_cache(maxsize=256)
def compile_wake_words(keywords: tuple[str, ...], patterns: tuple[str, ...]) -> WakeWords:
    """The wake words of a chat; raises `UnsafePattern` for a refused pattern."""
    return WakeWords(
        tuple(k.strip().casefold() for k in keywords if k.strip()),
        tuple(check_linear(p) for p in patterns),
    )


# ------------------------------------------------------------------ other bots


LOOP_WINDOW = timedelta(minutes=10)
LOOP_ROUNDS = 3
"""Another bot's messages answered in one chat within `LOOP_WINDOW`; past it the exchange
stops until the window moves on (two bots answering each other would never end)."""


class BotLoopGuard:
    """Counts the other bots' messages the bot answered, per chat, in this process. Asked
    again about a message it already allowed (a message is looked at several times on its
    way in), it answers the same without counting it twice."""

    def __init__(self, *, rounds: int = LOOP_ROUNDS, window: timedelta = LOOP_WINDOW) -> None:
        self.rounds = rounds
        self.window = window
        self._answered: dict[int, deque[tuple[datetime, int]]] = {}

    def allows(self, chat_id: int, message_id: int, at: datetime) -> bool:
        answered = self._answered.setdefault(chat_id, deque())
        while answered and at - answered[0][0] > self.window:
            answered.popleft()
        if any(known == message_id for _, known in answered):
            return True
        if len(answered) >= self.rounds:
            return False
        answered.append((at, message_id))
        return True

"""Whole-turn trimming of provider-facing history and the breadcrumb.

Three primitives (docs/context-window.md, Trims) share one shape of answer, `TrimResult`:

- `trim_to_recent_turns`: a token budget; drops the fewest oldest whole turns until it fits.
- `trim_to_recent_turn_count`: a turn cap on the provider-facing list (`bot.context.turn_cap`).
- `trim_conversation_to_recent_turns`: the same cap on structured (stored) history (there too).

All three keep the newest whole turn even when it alone is over the limit, and none of them
splits a turn, so a tool call never leaves without its result. Messages before the first
turn start (an orphan prefix, e.g. the tail of an already trimmed exchange) belong to the
first turn: they leave with it.

Cost: the token trim walks back from the newest message over cached per-message costs and
stops once over budget, so deciding and building the kept list follow the kept window. The
dropped part is kept as one slice (`TrimResult.dropped`) and the statistics about it
(`dropped_messages`, `dropped_turns`, `tokens_before`) are computed when read, in
O(dropped). Callers that emit `HistoryTrimmed` (`bot.context.history_trimmed`) pay that
once per trim; a caller that only needs the kept messages never does. A caller that trims
the same growing list again and again (the agent loop trims at every provider call) can
hold it as an `IndexedHistory`: running totals kept as messages are appended, so the
dropped figures cost O(1) and the whole trim, event included, follows the kept window.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, compress, islice, repeat
from operator import attrgetter, countOf, eq
from typing import Literal, overload

from bot.context.tokens import compute_message_tokens, estimate_history_tokens, estimate_span_tokens
from bot.context.turns import count_turns, is_turn_start, leading_system_count
from bot.domain.messages import ChatMessage

BREADCRUMB_TEXT = "[earlier turns omitted to fit the context window]"

_ROLE = attrgetter("role")
_IS_CRUMB = attrgetter("is_breadcrumb")
_TOKENS = attrgetter("tokens")

TrimReason = Literal["token_budget", "turn_limit", "message_limit", "overflow_recovery"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TrimResult:
    """What a trim kept and what it dropped.

    `messages` is the history to send; `dropped` the removed messages, oldest first (what a
    compaction would summarise). `kept_turns` counts turns in `messages`; `tokens_after` is
    their estimate. The remaining figures are derived from `dropped` when read.
    """

    messages: tuple[ChatMessage, ...]
    dropped: tuple[ChatMessage, ...] = ()
    kept_turns: int
    tokens_after: int
    # (dropped_messages, dropped_turns, dropped tokens) when the trim read them from an
    # `IndexedHistory`; None means "scan `dropped` when read"
    known: tuple[int, int, int] | None = field(default=None, repr=False, compare=False)

    @property
    def trimmed(self) -> bool:
        return bool(self.dropped)

    # The figures below scan the dropped part when read. They lean on C-level passes
    # (map/attrgetter/countOf) because the dropped part is most of a long history.

    @property
    def dropped_messages(self) -> int:
        """Dropped conversation messages; system rows and breadcrumbs are not counted."""
        if self.known is not None:
            return self.known[0]
        dropped = self.dropped
        uncounted = countOf(map(_ROLE, dropped), "system")
        if any(map(_IS_CRUMB, dropped)):
            uncounted += sum(1 for m in dropped if m.is_breadcrumb and m.role != "system")
        return len(dropped) - uncounted

    @property
    def dropped_turns(self) -> int:
        if self.known is not None:
            return self.known[1]
        users = compress(self.dropped, map(eq, map(_ROLE, self.dropped), repeat("user")))
        return sum(map(is_turn_start, users))

    @property
    def tokens_before(self) -> int:
        if self.known is not None:
            return self.tokens_after + self.known[2]
        try:
            dropped: int = sum(map(_TOKENS, self.dropped))
        except TypeError:  # some message has no cached estimate
            dropped = estimate_history_tokens(self.dropped)
        return self.tokens_after + dropped


# ---------------------------------------------------------------- breadcrumb


def breadcrumb_message() -> ChatMessage:
    """The breadcrumb: a user-role note, flagged so no code ever has to match its text."""
    crumb = ChatMessage(role="user", content=BREADCRUMB_TEXT, is_breadcrumb=True)
    return ChatMessage(
        role="user",
        content=BREADCRUMB_TEXT,
        is_breadcrumb=True,
        tokens=compute_message_tokens(crumb),
    )


def _has_crumb_after_system(messages: Sequence[ChatMessage], crumb_present: bool) -> bool:
    if crumb_present:
        return True
    s = leading_system_count(messages)
    return s < len(messages) and messages[s].is_breadcrumb


def insert_breadcrumb(messages: list[ChatMessage], crumb_present: bool) -> bool:
    """Insert the breadcrumb right after the leading system messages, in place.

    Returns whether one was inserted: never when `crumb_present` or when a flagged crumb
    already sits there (no stacking). A user message that merely reads like the breadcrumb
    is a real message and changes nothing.
    """
    if _has_crumb_after_system(messages, crumb_present):
        return False
    messages.insert(leading_system_count(messages), breadcrumb_message())
    return True


def with_breadcrumb(
    messages: Sequence[ChatMessage], *, crumb_present: bool = False
) -> tuple[ChatMessage, ...]:
    """The pure form of `insert_breadcrumb`: a new tuple with the crumb in place."""
    if _has_crumb_after_system(messages, crumb_present):
        return tuple(messages)
    s = leading_system_count(messages)
    return (*messages[:s], breadcrumb_message(), *messages[s:])


# ---------------------------------------------------------------- indexed history


def _counted(message: ChatMessage) -> bool:
    """Whether `dropped_messages` counts this message."""
    return message.role != "system" and not message.is_breadcrumb


class IndexedHistory(Sequence[ChatMessage]):
    """A provider-facing message list with running totals kept as messages are appended.

    Totals per prefix: token estimate (the cached `tokens` when set), turn starts and
    counted messages, so the figures of any span cost O(1). It is a `Sequence`, so every
    function of this module takes it; the token trim reads the dropped part's figures from
    it instead of scanning. Append-only: to insert (the breadcrumb) build a new one, which
    costs O(len) once, not once per trim.
    """

    __slots__ = ("_counted", "_items", "_starts", "_tokens")

    def __init__(self, messages: Iterable[ChatMessage] = ()) -> None:
        items = list(messages)
        self._items = items
        # whole-list passes run in C where they can (map/accumulate); appends go one by one
        costs = list(map(_TOKENS, items))
        if None in costs:
            costs = [
                compute_message_tokens(m) if c is None else c
                for m, c in zip(items, costs, strict=True)
            ]
        self._tokens: list[int] = list(accumulate(costs, initial=0))
        self._starts: list[int] = list(accumulate(map(is_turn_start, items), initial=0))
        self._counted: list[int] = list(accumulate(map(_counted, items), initial=0))

    def append(self, message: ChatMessage) -> None:
        cached = message.tokens
        cost = compute_message_tokens(message) if cached is None else cached
        self._items.append(message)
        self._tokens.append(self._tokens[-1] + cost)
        self._starts.append(self._starts[-1] + is_turn_start(message))
        self._counted.append(self._counted[-1] + _counted(message))

    def extend(self, messages: Iterable[ChatMessage]) -> None:
        for message in messages:
            self.append(message)

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> ChatMessage: ...

    @overload
    def __getitem__(self, index: slice) -> list[ChatMessage]: ...

    def __getitem__(self, index: int | slice) -> ChatMessage | list[ChatMessage]:
        return self._items[index]

    def __iter__(self) -> Iterator[ChatMessage]:
        return iter(self._items)

    @property
    def items(self) -> list[ChatMessage]:
        """The messages themselves (do not mutate: the totals would go stale)."""
        return self._items

    @property
    def tokens(self) -> int:
        """The estimate of the whole list."""
        return self._tokens[-1]

    def span(self, begin: int, end: int) -> tuple[int, int, int]:
        """(counted messages, turn starts, tokens) of `self[begin:end]`."""
        return (
            self._counted[end] - self._counted[begin],
            self._starts[end] - self._starts[begin],
            self._tokens[end] - self._tokens[begin],
        )


# ---------------------------------------------------------------- trimming


def protected_prefix(messages: Sequence[ChatMessage], crumb_present: bool) -> int:
    """Leading system messages, plus the breadcrumb right after them.

    `crumb_present` says that message is the crumb even without the flag (a history whose
    flag was lost); a flagged crumb there is recognised without it.
    """
    s = leading_system_count(messages)
    if s < len(messages) and (crumb_present or messages[s].is_breadcrumb):
        return s + 1
    return s


def _slice(messages: Sequence[ChatMessage], begin: int, end: int) -> tuple[ChatMessage, ...]:
    """`tuple(messages[begin:end])` with one copy, not a list slice and then a tuple of it."""
    if isinstance(messages, tuple):
        return messages[begin:end]
    return tuple(islice(messages, begin, end))


def unchanged(messages: Sequence[ChatMessage], *, turns: int, tokens: int) -> TrimResult:
    return TrimResult(messages=tuple(messages), kept_turns=turns, tokens_after=tokens)


def cut_result(
    messages: Sequence[ChatMessage], prefix: int, cut: int, *, turns: int, tokens: int
) -> TrimResult:
    if isinstance(messages, IndexedHistory):
        items = messages.items
        return TrimResult(
            messages=(*items[:prefix], *items[cut:]),
            dropped=tuple(items[prefix:cut]),
            kept_turns=turns,
            tokens_after=tokens,
            known=messages.span(prefix, cut),
        )
    return TrimResult(
        messages=(*messages[:prefix], *messages[cut:]),
        dropped=_slice(messages, prefix, cut),
        kept_turns=turns,
        tokens_after=tokens,
    )


def _has_turn_start(messages: Sequence[ChatMessage], begin: int, end: int) -> bool:
    """Whether a turn starts in `messages[begin:end]`; scans from `end` since the previous
    turn start is usually close."""
    return any(is_turn_start(messages[i]) for i in range(end - 1, begin - 1, -1))


def trim_to_recent_turns(
    messages: Sequence[ChatMessage], budget: int, *, crumb_present: bool = False
) -> TrimResult:
    """Drop the fewest oldest whole turns until the estimate fits `budget` (0 = off).

    Unchanged when the budget is 0, the history fits, or it holds at most one turn. The
    leading system messages and the breadcrumb after them are always kept and count
    towards the budget; the newest whole turn is kept even when it alone is over.
    """
    n = len(messages)
    prefix = protected_prefix(messages, crumb_present)
    if budget <= 0:
        return unchanged(
            messages, turns=count_turns(messages, prefix), tokens=estimate_history_tokens(messages)
        )
    walk: Sequence[ChatMessage] = messages
    if isinstance(messages, IndexedHistory):
        if messages.tokens <= budget:
            _, turns, _ = messages.span(prefix, n)
            return unchanged(messages, turns=turns, tokens=messages.tokens)
        walk = messages.items  # plain list indexing in the loop below
    acc = estimate_span_tokens(walk, 0, prefix)
    seen = 0  # turn starts walked so far
    cut = cut_tokens = cut_turns = -1  # oldest turn start whose suffix fits (or the newest)
    cut_fits = False
    newer = newer_tokens = newer_turns = -1  # the fitting cut before `cut`
    i = n
    while i > prefix:
        i -= 1
        message = walk[i]
        cached = message.tokens
        acc += compute_message_tokens(message) if cached is None else cached
        starts = is_turn_start(message)
        seen += starts
        if acc <= budget:
            if starts:
                newer, newer_tokens, newer_turns = cut, cut_tokens, cut_turns
                cut, cut_tokens, cut_turns, cut_fits = i, acc, seen, True
            continue
        if cut < 0:
            if not starts:
                continue  # still looking for the newest turn start, kept whatever it costs
            cut, cut_tokens, cut_turns = i, acc, seen
        break
    else:
        # walked everything: it fits, or no turn starts at all
        return unchanged(messages, turns=seen, tokens=acc)

    # `cut` must not be the oldest turn start: cutting there would drop only the orphan
    # prefix, which belongs to the first turn.
    earlier = (i < cut and is_turn_start(walk[i])) or _has_turn_start(walk, prefix, i)
    if not earlier:
        if cut_fits and newer >= 0:
            return cut_result(messages, prefix, newer, turns=newer_turns, tokens=newer_tokens)
        rest = estimate_span_tokens(walk, prefix, i)
        return unchanged(messages, turns=1, tokens=acc + rest)
    return cut_result(messages, prefix, cut, turns=cut_turns, tokens=cut_tokens)

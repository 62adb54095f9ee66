"""Spend amounts and limits, and the counters that hold them: the port (`SpendCounters`,
one SQL table in `storage/spend.py`) and its in-memory twin (`LocalSpendCounters`).

Money is counted in integer billionths (`NANOS`), so sums and limits compare exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

NANOS = 1_000_000_000
"""Billionths of the currency unit: the integer money is counted in."""

Scope = Literal["member", "chat", "day", "month"]
SCOPES: tuple[Scope, ...] = ("member", "chat", "day", "month")
"""The order budgets are checked (and rows locked) in."""


def nanos(value: float) -> int:
    """A money amount in billionths."""
    return round(value * NANOS)


@dataclass(frozen=True, slots=True)
class Amount:
    """Money (billionths of the ledger's currency) and billable-equivalent tokens."""

    cost: int = 0
    tokens: int = 0

    def __add__(self, other: Amount) -> Amount:
        return Amount(self.cost + other.cost, self.tokens + other.tokens)

    def __neg__(self) -> Amount:
        return Amount(-self.cost, -self.tokens)

    @property
    def money(self) -> float:
        return self.cost / NANOS


ZERO = Amount()


@dataclass(frozen=True, slots=True)
class Limit:
    """A budget's limit: money (billionths) and/or tokens; 0 is no limit on that part."""

    cost: int = 0
    tokens: int = 0

    @property
    def set(self) -> bool:
        return self.cost > 0 or self.tokens > 0

    def reached(self, used: Amount) -> bool:
        return (self.cost > 0 and used.cost >= self.cost) or (
            self.tokens > 0 and used.tokens >= self.tokens
        )

    def share(self, used: Amount) -> float:
        """How much of the limit is used: the larger share of its set parts (0 unset)."""
        shares = [used.cost / self.cost] if self.cost > 0 else []
        if self.tokens > 0:
            shares.append(used.tokens / self.tokens)
        return max(shares, default=0.0)


@dataclass(frozen=True, slots=True)
class Counter:
    """One counted budget in one period (`YYYY-MM-DD`, or `YYYY-MM` for `month`); the bot's
    budgets have chat and user 0, a chat's user 0."""

    scope: Scope
    period: str
    chat_id: int = 0
    user_id: int = 0


@dataclass(frozen=True, slots=True)
class Change:
    """What happens to one counter: `spent` is added; `held` is added to what calls in flight
    hold (negative: released). `limit` is what `SpendCounters.hold` checks against."""

    counter: Counter
    spent: Amount = ZERO
    held: Amount = ZERO
    limit: Limit = Limit()


class SpendCounters(Protocol):
    """The spend of each budget: in this process, or shared by the workers of one database
    (`storage.spend`)."""

    async def hold(self, changes: Sequence[Change]) -> Counter | None:
        """If every counter's spent + held is below its `limit`, add each `held` and return
        None; else change nothing and return the first counter (in `SCOPES` order) that
        reached its limit. Atomic across every process sharing the counters."""
        ...

    async def settle(self, changes: Sequence[Change]) -> dict[Counter, Amount]:
        """Apply each change; the counters' spent totals after it."""
        ...

    async def totals(self, counters: Sequence[Counter]) -> dict[Counter, Amount]:
        """The spent totals of `counters` (absent: nothing spent)."""
        ...

    async def top(self, scope: Scope, period: str, count: int) -> list[tuple[Counter, Amount]]:
        """The `count` counters of `scope` in `period` that spent the most money (then
        tokens), largest first."""
        ...

    async def claim_notice(self, kind: str, counter: Counter) -> bool:
        """True once per (kind, counter), across processes: whoever gets it tells."""
        ...

    async def forget_before(self, month: str) -> None:
        """Drop the counters and notices of periods before `month` (`YYYY-MM`)."""
        ...


@dataclass(slots=True)
class LocalSpendCounters:
    """`SpendCounters` in this process only (the in-memory store, tests)."""

    spent: dict[Counter, Amount] = field(default_factory=dict)
    held: dict[Counter, Amount] = field(default_factory=dict)
    notices: set[tuple[str, Counter]] = field(default_factory=set)

    async def hold(self, changes: Sequence[Change]) -> Counter | None:
        for change in sorted(changes, key=lambda c: SCOPES.index(c.counter.scope)):
            counter = change.counter
            used = self.spent.get(counter, ZERO) + self.held.get(counter, ZERO)
            if change.limit.reached(used):
                return counter
        for change in changes:
            self.held[change.counter] = self.held.get(change.counter, ZERO) + change.held
        return None

    async def settle(self, changes: Sequence[Change]) -> dict[Counter, Amount]:
        for change in changes:
            counter = change.counter
            self.spent[counter] = self.spent.get(counter, ZERO) + change.spent
            held = self.held.get(counter, ZERO) + change.held
            self.held[counter] = Amount(max(0, held.cost), max(0, held.tokens))
        return {c.counter: self.spent[c.counter] for c in changes}

    async def totals(self, counters: Sequence[Counter]) -> dict[Counter, Amount]:
        return {c: self.spent.get(c, ZERO) for c in counters}

    async def top(self, scope: Scope, period: str, count: int) -> list[tuple[Counter, Amount]]:
        rows = [(c, a) for c, a in self.spent.items() if c.scope == scope and c.period == period]
        rows.sort(key=lambda row: (-row[1].cost, -row[1].tokens, row[0].chat_id))
        return rows[:count]

    async def claim_notice(self, kind: str, counter: Counter) -> bool:
        if (kind, counter) in self.notices:
            return False
        self.notices.add((kind, counter))
        return True

    async def forget_before(self, month: str) -> None:
        # `YYYY-MM-DD` and `YYYY-MM` both sort before `month` exactly when older than it
        for table in (self.spent, self.held):
            for counter in [c for c in table if c.period < month]:
                del table[counter]
        self.notices = {(k, c) for k, c in self.notices if c.period >= month}


def describe_amount(used: Amount, limit: Limit, currency: str) -> str:
    """`0.0312 / 0.0500 USD, 12,400 / 50,000 tokens`: the set parts of a limit, or what was
    spent when no limit is set."""
    parts = []
    if limit.cost > 0 or not limit.tokens:
        money = f"{used.money:.4f}"
        parts.append(
            f"{money} / {limit.cost / NANOS:.4f} {currency}"
            if limit.cost > 0
            else f"{money} {currency}"
        )
    if limit.tokens > 0 or not limit.cost:
        parts.append(
            f"{used.tokens:,} / {limit.tokens:,} tokens"
            if limit.tokens > 0
            else f"{used.tokens:,} tokens"
        )
    return ", ".join(parts)

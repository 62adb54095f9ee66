"""One INFO line per handled turn (`tgbot.turns`): the chat, the member, the scene, what
started it, tokens, latency, cost and how it ended; never what anyone wrote. The totals of
the process's turns (`TurnTotals`) make the line `tgbot run` logs when it stops."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field

from bot.agent.events import (
    EventBus,
    ModelCalled,
    ToolWatch,
    TurnObserver,
    TurnOutcome,
    TurnWatch,
)
from bot.domain.messages import ToolCall
from bot.ports import SessionInfo

log = logging.getLogger("tgbot.turns")


@dataclass(slots=True)
class _Sums:
    calls: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    latency_ms: int = 0
    started: float = 0.0
    cost: float | None = 0.0
    """None once one call of the turn had no prices (its cost unknown, not zero)."""


@dataclass(slots=True)
class TurnTotals:
    """What the process's turns added up to, since it started."""

    started: float = field(default_factory=time.monotonic)
    answered: int = 0
    failed: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    unpriced: int = 0
    """Turns whose cost is unknown (a call without prices)."""

    def add(self, sums: _Sums, outcome: TurnOutcome) -> None:
        if outcome.status == "answered":
            self.answered += 1
        else:
            self.failed += 1
        self.input_tokens += sums.input_tokens
        self.output_tokens += sums.output_tokens
        if sums.cost is None:
            self.unpriced += 1
        else:
            self.cost += sums.cost

    def line(self, now: float | None = None) -> str:
        """The line `tgbot run` logs when it stops."""
        up = round((time.monotonic() if now is None else now) - self.started)
        hours, rest = divmod(up, 3600)
        uptime = f"{hours}h{rest // 60:02d}m{rest % 60:02d}s"
        cost = f"cost {self.cost:.6f}"
        if self.unpriced:
            cost += f" (+{self.unpriced} turn(s) without prices)"
        return (
            f"stopped after {uptime}: {self.answered + self.failed} turn(s) handled "
            f"({self.answered} answered, {self.failed} failed); tokens in "
            f"{self.input_tokens} out {self.output_tokens}; {cost}"
        )


@dataclass(slots=True)
class TurnLog:
    """A `TurnObserver` around another (the tracer, or none): adds up each turn's model calls
    from the bus and logs one line when the turn ends."""

    bus: EventBus
    inner: TurnObserver
    _turns: dict[str, _Sums] = field(default_factory=dict)
    totals: TurnTotals = field(default_factory=TurnTotals)

    def __post_init__(self) -> None:
        self.bus.on(ModelCalled, self._called)

    def _called(self, event: ModelCalled) -> None:
        sums = self._turns.get(event.turn_id)
        if sums is None or event.purpose not in ("turn", "job"):
            return
        sums.calls += 1
        sums.latency_ms += event.latency_ms
        if event.usage is None:
            return
        sums.input_tokens += event.usage.input_tokens
        sums.cached_tokens += event.usage.cached_tokens
        sums.output_tokens += event.usage.output_tokens
        prices = event.route.prices
        if sums.cost is not None:
            sums.cost = sums.cost + prices.cost(event.usage) if prices.configured else None

    def turn(self, session: SessionInfo, turn_id: str) -> AbstractContextManager[TurnWatch]:
        return self._watch(session, turn_id)

    @contextmanager
    def _watch(self, session: SessionInfo, turn_id: str) -> Iterator[TurnWatch]:
        sums = self._turns[turn_id] = _Sums(started=time.monotonic())
        try:
            with self.inner.turn(session, turn_id) as inner:
                yield _Ended(self, session, turn_id, sums, inner)
        finally:
            self._turns.pop(turn_id, None)

    def tool_call(self, call: ToolCall) -> AbstractContextManager[ToolWatch]:
        return self.inner.tool_call(call)


@dataclass(slots=True)
class _Ended:
    owner: TurnLog
    session: SessionInfo
    turn_id: str
    sums: _Sums
    inner: TurnWatch

    def ended(self, outcome: TurnOutcome) -> None:
        self.inner.ended(outcome)
        self.owner.totals.add(self.sums, outcome)
        log.info("%s", turn_line(self.session, self.turn_id, self.sums, outcome))


def turn_line(session: SessionInfo, turn_id: str, sums: _Sums, outcome: TurnOutcome) -> str:
    key = session.key
    thread = f"/{key.thread_id}" if key.thread_id else ""
    member = outcome.requester if outcome.requester is not None else "-"
    cost = "no prices" if sums.cost is None else f"{sums.cost:.6f}"
    how = outcome.status if outcome.failure is None else f"{outcome.status} ({outcome.failure})"
    return (
        f"turn {turn_id} {how}: chat {key.chat_id}{thread} ({session.scene}) member {member} "
        f"trigger {outcome.trigger or '-'}; "
        f"{sums.calls} call(s), tokens in {sums.input_tokens} (cached {sums.cached_tokens}) "
        f"out {sums.output_tokens}; {round((time.monotonic() - sums.started) * 1000)} ms "
        f"(model {sums.latency_ms} ms); cost {cost}"
    )

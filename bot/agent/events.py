"""What a turn publishes and who watches it.

Runtime events (trims, model calls) go to the log and to the bus's subscribers (`EventBus`).
A tracer watches turns and tool calls as they run (`TurnObserver`): the runtime opens one
watch per turn (`TurnRunner.run_turn`) and one per tool call the model made
(`ToolRunner.run_calls`), and says how each ended. Model calls need no watch: each is a
`ModelCalled` on the bus, published from inside its turn, so a tracer that keeps the turn
current while it runs can hang the call under it. `NO_OBSERVER` watches nothing; the
OpenTelemetry tracer (`adapters/otel.py`) is wired only when an OTLP endpoint is configured.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol, TypeVar

from bot.agent.routes import ModelRoute
from bot.context.history_trimmed import HistoryTrimmed
from bot.context.tokens import RequestTokens
from bot.domain.messages import ToolCall
from bot.domain.platform_messages import Delivery
from bot.domain.records import ToolResult
from bot.ports import LLMRequest, LLMResponse, SessionInfo, Usage

log = logging.getLogger("tgbot.events")


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCalled:
    """One provider call of a turn, answered or not, with what we knew when it was made.

    `final` is the summary call once the tool-call cap is hit; `error` what ended the call
    (None when the provider answered), including a capacity check that stopped it before
    sending (`latency_ms` 0). `trims` are every trim since the previous call, in order (a
    window move and a proactive trim of one call are two); `trim` the last. `fixed_tokens`
    and `tokens` are our estimate of the request (fixed part, then history / current /
    images); `usage` what the provider reported.
    """

    at: datetime
    session: SessionInfo
    turn_id: str
    iteration: int
    final: bool
    route: ModelRoute
    usage: Usage | None
    tool_calls: int
    error: Exception | None
    latency_ms: int
    fixed_tokens: int
    tokens: RequestTokens
    trims: tuple[HistoryTrimmed, ...]
    budget: int
    history_budget: int
    kept_turns: int
    dropped_turns: int
    purpose: Literal["turn", "compaction", "judge", "catchup", "job"] = "turn"
    """`compaction`: a summary call, not part of the member's turn; `judge`: whether to
    answer an unaddressed message (ambient mode); `catchup`: a `/catchup` summary; `job`: a
    call of a scheduled task's turn."""
    exact_tokens: int | None = None
    """The request as the route's exact tokenizer counts it, when one is configured."""
    call_id: str = ""
    """Names the call in its ledger line and its trace (`bot.agent.traces`)."""
    request: LLMRequest | None = None
    """The request exactly as handed to the provider (`None`: the call was never sent)."""
    response: LLMResponse | None = None

    @property
    def trim(self) -> HistoryTrimmed | None:
        return self.trims[-1] if self.trims else None


RuntimeEvent = HistoryTrimmed | ModelCalled
E = TypeVar("E", HistoryTrimmed, ModelCalled)
Subscriber = Callable[[E], Awaitable[None] | None]


@dataclass(slots=True)
class EventBus:
    """Fan-out of runtime events by type; a failing subscriber never breaks a turn."""

    subscribers: list[tuple[type[Any], Callable[[Any], Awaitable[None] | None]]]

    def __init__(self) -> None:
        self.subscribers = []

    def on(self, kind: type[E], subscriber: Subscriber[E]) -> None:
        """Call `subscriber` with every published event of type `kind`."""
        self.subscribers.append((kind, subscriber))

    def subscribe(self, subscriber: Subscriber[HistoryTrimmed]) -> None:
        """Call `subscriber` with every `HistoryTrimmed` (same as `on(HistoryTrimmed, …)`)."""
        self.on(HistoryTrimmed, subscriber)

    async def publish(self, event: RuntimeEvent) -> None:
        if isinstance(event, HistoryTrimmed):
            _log_trim(event)
        for kind, subscriber in list(self.subscribers):
            if not isinstance(event, kind):
                continue
            try:
                outcome = subscriber(event)
                if outcome is not None:
                    await outcome
            except Exception:
                log.exception("a %s subscriber failed", type(event).__name__)


def _log_trim(event: HistoryTrimmed) -> None:
    log.info(
        "HistoryTrimmed session=%s turn=%s reason=%s dropped_turns=%d dropped_messages=%d "
        "kept_turns=%d tokens %d->%d budget=%d",
        event.session,
        event.turn_id,
        event.reason,
        event.dropped_turns,
        event.dropped_messages,
        event.kept_turns,
        event.tokens_before,
        event.tokens_after,
        event.budget,
    )


# Watching turns and tool calls: the port a tracer implements


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnOutcome:
    """How a turn ended: answered (the reply was delivered) or failed (with `error`)."""

    status: Literal["answered", "failed"]
    text: str = ""
    delivery: Delivery | None = None
    iterations: int = 0
    hit_iteration_cap: bool = False
    error: str | None = None
    failure: str | None = None
    """What kind of failure (the `TurnFailed` key, or `not_delivered`); None when answered."""
    requester: int | None = None
    """The member whose message the turn answered (None: not known)."""
    trigger: str | None = None
    """What started the turn (`bot.services.inbound_rules.Trigger`: mention, reply,
    private, wake_word, ambient, edit, retry, recovery, job...); None: not said."""


_Outcome = TypeVar("_Outcome", contravariant=True)


class Watch(Protocol[_Outcome]):
    def ended(self, outcome: _Outcome) -> None:
        """How the watched work ended: a turn's outcome, or what a tool call gave the model
        (an error result included). Work that raised never gets here: the watch sees the
        error."""
        ...


TurnWatch = Watch[TurnOutcome]
ToolWatch = Watch[ToolResult]


class TurnObserver(Protocol):
    def turn(self, session: SessionInfo, turn_id: str) -> AbstractContextManager[TurnWatch]:
        """Open while the turn runs, from before its request is built to after its reply."""
        ...

    def tool_call(self, call: ToolCall) -> AbstractContextManager[ToolWatch]:
        """Open while one tool call runs (or is refused over a cap)."""
        ...


class _Unwatched:
    def ended(self, outcome: object) -> None:
        return None


class NullObserver:
    """Watches nothing (tracing is off)."""

    def turn(self, session: SessionInfo, turn_id: str) -> AbstractContextManager[TurnWatch]:
        return nullcontext(_Unwatched())

    def tool_call(self, call: ToolCall) -> AbstractContextManager[ToolWatch]:
        return nullcontext(_Unwatched())


NO_OBSERVER: TurnObserver = NullObserver()

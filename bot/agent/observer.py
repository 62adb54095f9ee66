"""Watching turns and tool calls as they run: the port a tracer implements.

The runtime opens one watch per turn (`TurnRunner.run_turn`) and one per tool call the model
made (`ToolRunner.run_calls`), and says how each ended. Model calls need no watch: each is a
`ModelCalled` on the bus, published from inside its turn, so a tracer that keeps the turn
current while it runs can hang the call under it. `NO_OBSERVER` watches nothing; the
OpenTelemetry tracer (`adapters/otel.py`) is wired only when an OTLP endpoint is configured.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Protocol, TypeVar

from bot.agent.turn import TurnOutcome
from bot.domain.messages import ToolCall
from bot.domain.records import ToolResult
from bot.ports import SessionInfo

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

"""Watching turns and tool calls as they run: the port a tracer implements.

The runtime opens one watch per turn (`TurnRunner.run_turn`) and one per tool call the model
made (`ToolRunner.run_calls`), and says how each ended. Model calls need no watch: each is a
`ModelCalled` on the bus, published from inside its turn, so a tracer that keeps the turn
current while it runs can hang the call under it. `NO_OBSERVER` watches nothing; the
OpenTelemetry tracer (`adapters/otel.py`) is wired only when an OTLP endpoint is configured.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Protocol

from bot.agent.turn import TurnOutcome
from bot.domain.messages import ToolCall
from bot.domain.records import ToolResult
from bot.ports import SessionInfo


class TurnWatch(Protocol):
    def ended(self, outcome: TurnOutcome) -> None:
        """How the turn ended (a turn that raised never gets here: the watch sees the error)."""
        ...


class ToolWatch(Protocol):
    def ended(self, result: ToolResult) -> None:
        """What the call gave the model (an error result included)."""
        ...


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

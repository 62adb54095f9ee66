"""Tool-calling calls whose traces wait for their results, and the results that complete them.

`bot.agent.trace_writer.TraceWriter` holds such a call (`Held`) until the next call of its
turn brings the tool messages (`tool_results`), then writes both in one trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.agent.events import ModelCalled
from bot.ports import LLMRequest


@dataclass(slots=True)
class Held:
    """A tool-calling call, waiting for the next call of its turn."""

    call: ModelCalled
    since: float
    """`time.monotonic()` when it began to wait."""
    written: bool = False
    """Written already, without its results (it waited the writer's `HOLD_SECONDS`, or a flush
    came)."""


def tool_results(previous: ModelCalled, request: LLMRequest) -> tuple[dict[str, Any], ...]:
    """The tool messages of `request` that answer the tool calls of the previous call."""
    response = previous.response
    ids = {call.id for call in response.tool_calls} if response is not None else set()
    return tuple(
        {
            "tool_call_id": message.tool_call_id,
            "name": message.name,
            "content": message.content,
            "is_error": message.is_error,
        }
        for message in request.messages
        if message.role == "tool" and message.tool_call_id in ids
    )

"""What a model call that did not answer may do next: the room left after a context overflow
(`overflow_room`), the larger output limit for the one retry of an answer cut at its limit
(`raised_output_limit`), whether a cut answer is still delivered (`deliverable`), and the
notice a provider error gives the member (`failure_key`). Pure; `ProviderCaller` acts on
them (`bot.agent.provider_call`).
"""

from __future__ import annotations

from bot.errors import (
    ContextOverflow,
    ProviderError,
    ProviderRateLimited,
    ProviderRejected,
    ProviderUnavailable,
)
from bot.ports import LLMResponse


def overflow_room(exc: ContextOverflow, refused: int) -> int:
    """After an overflow: the size (real tokens) no request of the turn may reach again.
    `refused` is what the refused request needed by our count; when the provider's body
    says its window and the request's size, our count is scaled by that ratio, and a window
    alone bounds it too."""
    room = refused
    if exc.limit is not None and exc.limit > 0:
        if exc.requested is not None and exc.requested > exc.limit:
            room = min(room, refused * exc.limit // exc.requested)
        room = min(room, exc.limit)
    return max(1, room)


def failure_key(exc: ProviderError) -> str:
    """The `TurnFailed` key (the member's notice) of a provider error."""
    if isinstance(exc, ProviderUnavailable | ProviderRateLimited):
        return "provider"
    if isinstance(exc, ProviderRejected):
        return "rejected"
    return "bad_response"


def deliverable(response: LLMResponse) -> bool:
    """An answer cut at the output limit is still delivered (with a cut marker) when it is
    text alone; a tool call cut short is never run, and an empty answer (the limit spent
    thinking) has nothing to show."""
    return not response.tool_calls and bool(response.text.strip())


def raised_output_limit(sent: int | None, response: LLMResponse, window: int) -> int | None:
    """The output limit for the one retry of a call cut at its limit: double the limit it
    hit, bounded by the model's maximum; `None` when there is no more room.

    The limit hit is the one the request sent (`sent`), else the output the provider
    reported (it sent no limit, so the provider's default was reached). No provider
    reports a model's output cap through its API, so the maximum is what the model's
    context window (`window`: the route's known window, else the honoured
    `max_context_tokens`, else the 32,000 assumed) leaves after this call's input as the
    provider reported it."""
    usage = response.usage
    hit = sent or (usage.output_tokens if usage is not None else 0)
    if hit <= 0:
        return None
    room = window - usage.input_tokens if usage is not None else window
    larger = min(2 * hit, room)
    return larger if larger > hit else None

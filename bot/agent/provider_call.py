"""Calling the provider: proactive trim, capacity check, one overflow recovery, events.

Before each call the request is trimmed to the runtime budget (whole turns, breadcrumb
in) and checked against the model's capacity; a request that cannot fit is never sent.
When the provider still reports a context overflow, the history is trimmed to two thirds
of the estimate and the call retried once. Every attempt is published as `ModelCalled`
(metering turns it into the ledger line), every trim as `HistoryTrimmed`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Literal

from bot.agent.events import EventBus, ModelCalled
from bot.agent.turn import TurnFailed, TurnPolicy, TurnState
from bot.context.history_trim import (
    HistoryTrimmed,
    IndexedHistory,
    TrimResult,
    insert_breadcrumb,
    trim_to_recent_turns,
)
from bot.context.token_correction import exact_message_tokens
from bot.context.tokens import (
    ensure_token_estimate,
    image_tokens,
    split_request_tokens,
    system_tokens,
)
from bot.context.window import check_capacity, recovery_target, tool_schema_text
from bot.domain.messages import ChatMessage
from bot.errors import (
    CapacityExceeded,
    ContextOverflow,
    ProviderError,
    ProviderRateLimited,
    ProviderUnavailable,
)
from bot.ports import Clock, LLMRequest, LLMResponse, ToolSpec
from bot.tools.base import Tool

FINAL_CALL_NOTE = (
    "[Tool results] The tool-call limit of this turn is reached. "
    "Answer now with what you have, without calling tools."
)


class ProviderCaller:
    """Makes the model calls of a turn. `tools` is the runner's live tool table."""

    def __init__(
        self, *, tools: Mapping[str, Tool], bus: EventBus, clock: Clock, policy: TurnPolicy
    ) -> None:
        self.tools = tools
        self.bus = bus
        self.clock = clock
        self.policy = policy

    async def call(self, state: TurnState, *, final: bool) -> LLMResponse:
        """One model call of the turn; `final` asks for the answer without tools (the
        tool-call cap is reached). Raises `TurnFailed` when the call cannot succeed."""
        tools = () if final else tuple(t.spec for t in self.tools.values())
        if final:
            state.messages.append(
                ensure_token_estimate(ChatMessage(role="user", content=FINAL_CALL_NOTE))
            )
        self._proactive_trim(state)
        await self._flush_trims(state)
        fixed = state.fixed_tokens if not final else system_tokens(state.messages)
        recovered = False
        while True:
            request = LLMRequest(
                model=state.route.model,
                messages=tuple(state.messages),
                tools=tools,
                max_output_tokens=self.policy.max_output_tokens,
            )
            images = image_tokens(state.messages)
            schemas = fixed - system_tokens(state.messages)
            # the window is real tokens: so is what must fit, counted exactly when the
            # route has a tokenizer file, else our estimate scaled by the route's correction
            count = state.route.count_tokens
            exact = None
            if count is not None:
                exact_messages = exact_message_tokens(state.messages, count) - images
                exact_schemas = count(tool_schema_text([_schema(t) for t in tools]))
                exact = exact_messages + exact_schemas + images
                needs = (exact_messages, exact_schemas, images)
            else:
                real = state.correction.apply
                needs = (real(state.messages.tokens - images), real(schemas), real(images))
            try:
                check_capacity(
                    message_tokens=needs[0],
                    tool_schema_tokens=needs[1],
                    image_tokens=needs[2],
                    context_window=state.route.context_window_for_math,
                    model=state.route.model,
                )
            except CapacityExceeded as exc:
                await self._called(state, None, None, error=exc, final=final, exact=exact)
                raise TurnFailed("capacity", str(exc)) from exc
            started = time.perf_counter()
            try:
                response = await state.route.provider.complete(request)
            except ContextOverflow as exc:
                await self._called(state, None, started, error=exc, final=final, exact=exact)
                if recovered or not self._recover(state):
                    raise TurnFailed("overflow", f"context overflow: {exc}") from exc
                recovered = True
                await self._flush_trims(state)
                continue
            except ProviderError as exc:
                await self._called(state, None, started, error=exc, final=final, exact=exact)
                transient = isinstance(exc, ProviderUnavailable | ProviderRateLimited)
                key = "provider" if transient else "bad_response"
                raise TurnFailed(key, f"{type(exc).__name__}: {exc}") from exc
            await self._called(state, response, started, error=None, final=final, exact=exact)
            return response

    async def _called(
        self,
        state: TurnState,
        response: LLMResponse | None,
        started: float | None,
        *,
        error: Exception | None,
        final: bool,
        exact: int | None = None,
    ) -> None:
        """Publish the call; the trims reported with it are done with."""
        latency = 0 if started is None else int((time.perf_counter() - started) * 1000)
        event = ModelCalled(
            at=self.clock.now(),
            session=state.session,
            turn_id=state.turn_id,
            iteration=state.iteration,
            final=final,
            route=state.route,
            usage=response.usage if response is not None else None,
            tool_calls=len(response.tool_calls) if response is not None else 0,
            error=error,
            latency_ms=latency,
            fixed_tokens=state.fixed_tokens,
            tokens=split_request_tokens(state.messages, state.current_index),
            trim=state.pending_trims[-1] if state.pending_trims else None,
            budget=state.budget,
            history_budget=state.history_budget,
            kept_turns=state.kept_turns,
            dropped_turns=state.dropped_turns,
            exact_tokens=exact,
        )
        state.pending_trims.clear()
        state.published_trims = 0
        await self.bus.publish(event)

    def _proactive_trim(self, state: TurnState) -> None:
        if state.budget <= 0:
            return
        budget = state.correction.to_estimate(state.budget)  # in estimate units
        result = trim_to_recent_turns(state.messages, budget, crumb_present=state.crumb)
        if result.trimmed:
            self._apply_trim(state, result, reason="token_budget", budget=budget)

    def _recover(self, state: TurnState) -> bool:
        target = recovery_target(state.messages.tokens)
        result = trim_to_recent_turns(state.messages, target, crumb_present=state.crumb)
        if not result.trimmed or result.dropped_turns == 0:
            return False
        self._apply_trim(state, result, reason="overflow_recovery", budget=target)
        return True

    def _apply_trim(
        self,
        state: TurnState,
        result: TrimResult,
        *,
        reason: Literal["token_budget", "overflow_recovery"],
        budget: int,
    ) -> None:
        messages = list(result.messages)
        dropped = len(state.messages) - len(messages)
        if insert_breadcrumb(messages, state.crumb):
            dropped -= 1
        state.crumb = True
        state.messages = IndexedHistory(messages)
        state.current_index = max(1, state.current_index - dropped)
        state.kept_turns = result.kept_turns
        state.dropped_turns += result.dropped_turns
        state.pending_trims.append(
            HistoryTrimmed.from_result(
                result,
                reason=reason,
                budget=budget,
                session=state.session.id,
                turn_id=state.turn_id,
            )
        )

    async def _flush_trims(self, state: TurnState) -> None:
        """Publish the trims not yet published; the next call reports the last one."""
        for event in state.pending_trims[state.published_trims :]:
            await self.bus.publish(event)
        state.published_trims = len(state.pending_trims)


def _schema(spec: ToolSpec) -> dict[str, object]:
    return {"name": spec.name, "description": spec.description, "parameters": spec.parameters}

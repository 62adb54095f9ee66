"""Calling the provider: proactive trim, capacity check, one overflow recovery, events.

Before each call the request is trimmed to the runtime budget (whole turns dropped from
the window's records, the rest rendered again, breadcrumb in), cleared of orphaned tool
steps, and checked against the model's capacity; a request that cannot fit is never sent.
When the provider still reports a context overflow (an error, or an answer that stopped at
the context window), the history is trimmed to two thirds of the estimate and the call
retried once. An answer cut at the output limit with nothing to deliver (a tool call cut
short, or no text at all) is asked once more with the limit doubled (`raised_output_limit`);
a 4xx that is not an overflow ends the turn as `rejected`. Every attempt is published as
`ModelCalled` (metering turns it into the ledger line) with every trim made since the
previous call, and every trim as `HistoryTrimmed`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from bot.agent.events import EventBus, ModelCalled
from bot.agent.policy import CallPolicy
from bot.agent.routes import ModelRoute
from bot.agent.traces import new_call_id
from bot.agent.turn import TurnFailed, TurnState
from bot.context.budget import RuntimeLimits
from bot.context.cache_plan import PlannedCache, ReadPoints, plan_cache, session_cache_key
from bot.context.history_trim import HistoryTrimmed, trim_to_recent_turns
from bot.context.tokens import (
    TokenCorrection,
    ensure_token_estimate,
    estimate_history_tokens,
    exact_message_tokens,
    image_tokens,
    split_request_tokens,
    system_tokens,
)
from bot.context.turns import remove_orphaned_tool_messages
from bot.context.window import (
    check_capacity,
    estimate_tool_schema_tokens,
    recovery_target,
    tool_schema_text,
)
from bot.domain.messages import ChatMessage
from bot.errors import (
    BudgetExceeded,
    CapacityExceeded,
    ContextOverflow,
    ProviderError,
    ProviderRateLimited,
    ProviderRejected,
    ProviderUnavailable,
)
from bot.ports import Clock, LLMRequest, LLMResponse, TextSink, ToolSpec
from bot.tools.base import Tool, offered_in

FINAL_CALL_NOTE = (
    "[Tool results] The tool-call limit of this turn is reached. "
    "Answer now with what you have, without calling tools."
)


class SpendCheck(Protocol):
    """Spend limits (`bot.agent.spend.SpendGuard`): holds a call's bounded cost on every
    limited budget right before it is sent, or raises `BudgetExceeded`."""

    async def before_call(
        self, state: TurnState, request: LLMRequest, *, input_tokens: int
    ) -> None: ...


class WindowTrimmer(Protocol):
    """Drops whole turns from a turn's window and renders the rest again."""

    async def drop_turns(
        self, state: TurnState, count: int, *, within: int | None = None
    ) -> tuple[int, int]: ...


CapacitySource = Literal["known", "max_context_tokens", "assumed"]


def capacity_window(route: ModelRoute, limits: RuntimeLimits) -> tuple[int, CapacitySource]:
    """The window the capacity check holds a request to, and where it comes from.

    The resolved window when known; else a positive `max_context_tokens`, honoured as the
    window (the same operand the budget uses: docs/context-window.md, Runtime budget); else the
    32,000 assumed for unknown capacity."""
    if route.context_window is not None and route.context_window > 0:
        return route.context_window, "known"
    honoured = limits.max_context_tokens
    if honoured is not None and honoured > 0:
        return honoured, "max_context_tokens"
    return route.context_window_for_math, "assumed"


@dataclass(frozen=True, slots=True)
class RequestNeeds:
    """What a request needs of the model's window, in real tokens: counted exactly when the
    route has a tokenizer file (`exact` is then the total), else our estimate scaled by the
    route's correction."""

    messages: int
    schemas: int
    images: int
    exact: int | None = None

    @property
    def total(self) -> int:
        return self.messages + self.schemas + self.images


def request_needs(
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolSpec],
    route: ModelRoute,
    correction: TokenCorrection,
) -> RequestNeeds:
    """What `messages` and the schemas of `tools` need of `route`'s window: the one measure
    every model call is held to (a turn's call and a summary call alike)."""
    images = image_tokens(messages)
    schemas = [tool.schema() for tool in tools]
    count = route.count_tokens
    if count is not None:
        exact_messages = exact_message_tokens(messages, count) - images
        exact_schemas = count(tool_schema_text(schemas))
        total = exact_messages + exact_schemas + images
        return RequestNeeds(exact_messages, exact_schemas, images, exact=total)
    real = correction.apply
    return RequestNeeds(
        real(estimate_history_tokens(messages) - images),
        real(estimate_tool_schema_tokens(schemas)),
        real(images),
    )


def check_request(
    needs: RequestNeeds, route: ModelRoute, limits: RuntimeLimits, *, within: int | None = None
) -> None:
    """Raise `CapacityExceeded` when a request needing `needs` cannot fit `route`'s window
    (`capacity_window`), or, with `within`, is not smaller than that many tokens (after an
    overflow: what the provider just refused). The one capacity check of every model call."""
    window, source = capacity_window(route, limits)
    if within is not None and within <= window:
        window, source = within - 1, "known"
    check_capacity(
        message_tokens=needs.messages,
        tool_schema_tokens=needs.schemas,
        image_tokens=needs.images,
        context_window=window,
        model=route.model,
        context_window_known=source == "known",
        honoured=source == "max_context_tokens",
    )


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


def _failure_key(exc: ProviderError) -> str:
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


def raised_output_limit(request: LLMRequest, response: LLMResponse, window: int) -> int | None:
    """The output limit for the one retry of a call cut at its limit: double the limit it
    hit, bounded by the model's maximum; `None` when there is no more room.

    The limit hit is the request's own, else the output the provider reported (it sent no
    limit, so the provider's default was reached). No provider reports a model's output cap
    through its API, so the maximum is what the model's context window (`window`: the
    route's known window, else the honoured `max_context_tokens`, else the 32,000 assumed)
    leaves after this call's input as the provider reported it."""
    usage = response.usage
    hit = request.max_output_tokens or (usage.output_tokens if usage is not None else 0)
    if hit <= 0:
        return None
    room = window - usage.input_tokens if usage is not None else window
    larger = min(2 * hit, room)
    return larger if larger > hit else None


class ProviderCaller:
    """Makes the model calls of a turn. `tools` is the runner's live tool table; `window`
    renders the turn's window again after a trim."""

    def __init__(
        self,
        *,
        tools: Mapping[str, Tool],
        bus: EventBus,
        clock: Clock,
        policy: CallPolicy,
        window: WindowTrimmer,
        read_points: ReadPoints | None = None,
        spend: SpendCheck | None = None,
    ) -> None:
        self.spend = spend
        """Spend limits, checked before each call is sent (None: no limits)."""
        self.read_points = read_points if read_points is not None else ReadPoints()
        """Where each session's requests wrote the cache (the next request reads there)."""
        self.tools = tools
        self.bus = bus
        self.clock = clock
        self.policy = policy
        self.window = window

    async def call(
        self, state: TurnState, *, final: bool, on_text: TextSink | None = None
    ) -> LLMResponse:
        """One model call of the turn; `final` asks for the answer without tools (the
        tool-call cap is reached). Raises `TurnFailed` when the call cannot succeed.

        The final call still sends the tool schemas, with `tool_choice: "none"`: the schemas
        lead the cached prefix on every provider, so dropping them would make this call
        miss the cache on the whole request (and, on a breakpoint cache, write it again)."""
        tools = tuple(t.spec for t in offered_in(self.tools, state.session.scene).values())
        if final:
            state.messages.append(
                ensure_token_estimate(ChatMessage(role="user", content=FINAL_CALL_NOTE))
            )
        fixed = state.fixed_tokens
        if state.budget > 0:
            # the budget holds the whole request, so the messages get what the tool
            # schemas leave (with an honoured max_context_tokens it is also the window);
            # the budget is in real tokens, the trim in estimate units
            schemas = fixed - system_tokens(state.messages)
            budget = state.correction.to_estimate(state.budget) - schemas
            await self._trim(state, max(1, budget), reason="token_budget")
        await self._flush_trims(state)
        window, _ = capacity_window(state.route, self.policy.limits)
        recovered = False
        output_limit = self.policy.max_output_tokens
        raised = False
        while True:
            # the last safety net: whatever a trim or a stored history left, the provider
            # never receives a tool result without its call (or a call without its result)
            messages = remove_orphaned_tool_messages(state.messages)
            cache = self._plan(state, messages)
            request = LLMRequest(
                model=state.route.model,
                messages=messages,
                tools=tools,
                tool_choice="none" if final and tools else None,
                max_output_tokens=output_limit,
                cache_plan=cache.plan,
            )
            # the window is real tokens: so is what must fit (`request_needs`)
            needs = request_needs(messages, tools, state.route, state.correction)
            exact = needs.exact
            try:
                check_request(needs, state.route, self.policy.limits, within=state.refused)
            except CapacityExceeded as exc:
                await self._called(
                    state, None, None, error=exc, final=final, exact=exact, request=request
                )
                raise TurnFailed("capacity", str(exc)) from exc
            if self.spend is not None:
                try:
                    await self.spend.before_call(state, request, input_tokens=needs.total)
                except BudgetExceeded as exc:
                    await self._called(state, None, None, error=exc, final=final, exact=exact)
                    raise TurnFailed(
                        "budget", str(exc), notice=exc.notice, silent=exc.notice is None
                    ) from exc
            started = time.perf_counter()
            deadline = self.policy.deadline_seconds
            try:
                async with asyncio.timeout(deadline):
                    if on_text is None:
                        response = await state.route.provider.complete(request)
                    else:  # a streaming provider feeds the live draft
                        response = await state.route.provider.complete(request, on_text=on_text)
            except TimeoutError as exc:
                late = ProviderUnavailable(f"no complete answer within {deadline:g} s")
                await self._called(state, None, started, error=late, final=final, exact=exact)
                raise TurnFailed("provider", str(late)) from exc
            except ContextOverflow as exc:
                await self._called(
                    state, None, started, error=exc, final=final, exact=exact, request=request
                )
                # no later request of the turn reaches what was just refused
                state.refused = overflow_room(exc, needs.total)
                if recovered or not await self._recover(state):
                    raise TurnFailed("overflow", f"context overflow: {exc}") from exc
                recovered = True
                await self._flush_trims(state)
                continue
            except ProviderError as exc:
                await self._called(
                    state, None, started, error=exc, final=final, exact=exact, request=request
                )
                raise TurnFailed(_failure_key(exc), f"{type(exc).__name__}: {exc}") from exc
            self.read_points.remember(state.session.id, state.route.model, cache.remember)
            await self._called(
                state, response, started, error=None, final=final, exact=exact, request=request
            )
            if response.stop == "context":  # stopped at the window: the overflow path
                state.refused = needs.total
                if recovered or not await self._recover(state):
                    raise TurnFailed("overflow", "the answer stopped at the context window")
                recovered = True
                await self._flush_trims(state)
                continue
            if response.stop == "length" and not deliverable(response):
                larger = None if raised else raised_output_limit(request, response, window)
                if larger is None:
                    raise TurnFailed("length", "the answer was cut at the output limit")
                raised, output_limit = True, larger
                continue
            return response

    def _plan(self, state: TurnState, messages: tuple[ChatMessage, ...]) -> PlannedCache:
        """The request's cache plan: the current message found by identity (an orphan
        repair may have shifted it), the session's read points for this model."""
        current = None
        if state.current_index < len(state.messages):
            held = state.messages[state.current_index]
            if held.role == "user":
                current = next((i for i, m in enumerate(messages) if m is held), None)
        return plan_cache(
            messages,
            current=current,
            previous=self.read_points.get(state.session.id, state.route.model),
            session_key=session_cache_key(state.session.id),
            digests=state.route.marks_cache,
        )

    async def _called(
        self,
        state: TurnState,
        response: LLMResponse | None,
        started: float | None,
        *,
        error: Exception | None,
        final: bool,
        exact: int | None = None,
        request: LLMRequest | None = None,
    ) -> None:
        """Publish the call with every trim made since the previous one; those are done with."""
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
            trims=tuple(state.pending_trims),
            budget=state.budget,
            history_budget=state.history_budget,
            kept_turns=state.kept_turns,
            dropped_turns=state.dropped_turns,
            exact_tokens=exact,
            call_id=new_call_id(self.clock.now()),
            request=request,
            response=response,
        )
        state.pending_trims.clear()
        state.published_trims = 0
        await self.bus.publish(event)

    async def _recover(self, state: TurnState) -> bool:
        """After an overflow: down to two thirds of the estimate, whole turns only."""
        target = recovery_target(state.messages.tokens)
        return await self._trim(state, target, reason="overflow_recovery")

    async def _trim(
        self,
        state: TurnState,
        budget: int,
        *,
        reason: Literal["token_budget", "overflow_recovery"],
    ) -> bool:
        """Drop the fewest oldest whole turns until the request fits `budget`, rendering the
        kept ones again after each cut (a re-rendered first message is a little longer, so
        it may take a second cut). Records one `HistoryTrimmed`; False when nothing went."""
        tokens_before = state.messages.tokens
        turns = messages = 0
        while True:
            plan = trim_to_recent_turns(state.messages, budget, crumb_present=state.crumb)
            if not plan.trimmed or plan.dropped_turns == 0:
                break
            dropped_turns, dropped_messages = await self.window.drop_turns(
                state, plan.dropped_turns, within=state.refused
            )
            if dropped_turns == 0:
                break
            turns += dropped_turns
            messages += dropped_messages
        if turns == 0:
            return False
        state.dropped_turns += turns
        state.pending_trims.append(
            HistoryTrimmed(
                dropped_messages=messages,
                dropped_turns=turns,
                kept_turns=state.kept_turns,
                reason=reason,
                tokens_before=tokens_before,
                tokens_after=state.messages.tokens,
                budget=budget,
                session=state.session.id,
                turn_id=state.turn_id,
            )
        )
        return True

    async def _flush_trims(self, state: TurnState) -> None:
        """Publish the trims not yet published; the next call reports them all."""
        for event in state.pending_trims[state.published_trims :]:
            await self.bus.publish(event)
        state.published_trims = len(state.pending_trims)

"""The one model caller: every call to a model, whatever its purpose, goes through here.

A turn's step, its final answer without tools, and a summary call are held to the same
measure (`request_needs`: exact where the route has a tokenizer file, else our estimate
times the route's learned correction) and the same check (`check_request`: the model's
window, or after an overflow what the provider just refused); they share one cache plan
(where the session's previous request wrote the cache, `ReadPoints`), one deadline, and
each attempt is one `ModelCalled` on the bus (metering turns it into the ledger line),
answered, refused by the provider, or never sent.

A route with fallbacks (`bot.agent.fallback`) is where a call goes to the next route when
its own is down and nothing of the reply was shown; the attempt on the next route is
planned for it (its tokenizer and correction, its window, its reasoning rule, its prices
for the spend check), so every purpose (a turn, a summary, a job) falls back alike.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from bot.agent.events import EventBus, ModelCalled
from bot.agent.fallback import falls_back, own_reasoning
from bot.agent.routes import ModelRoute, RouteChains
from bot.agent.traces import new_call_id
from bot.context.cache_plan import ReadPoints, plan_cache, session_cache_key
from bot.context.history_trimmed import HistoryTrimmed
from bot.context.tokens import (
    NO_CORRECTION,
    RequestTokens,
    TokenCorrection,
    estimate_history_tokens,
    exact_message_tokens,
    image_tokens,
)
from bot.context.tool_schema_cost import estimate_tool_schema_tokens, tool_schema_text
from bot.context.window import (
    RuntimeLimits,
    check_capacity,
    window_for_math,
)
from bot.domain.messages import ChatMessage
from bot.errors import CapacityExceeded, ProviderError, ProviderUnavailable
from bot.ports import Clock, LLMRequest, LLMResponse, SessionInfo, TextSink, ToolSpec

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
    return window_for_math(route.context_window), "assumed"


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
    count = route.count_tokens
    if count is not None:
        exact_messages = exact_message_tokens(messages, count) - images
        exact_schemas = count(tool_schema_text([tool.schema() for tool in tools]))
        total = exact_messages + exact_schemas + images
        return RequestNeeds(exact_messages, exact_schemas, images, exact=total)
    real = correction.apply
    return RequestNeeds(
        real(estimate_history_tokens(messages) - images),
        real(_schema_estimate(tools)),
        real(images),
    )


_SCHEMA_ESTIMATES: dict[tuple[int, ...], tuple[int, tuple[ToolSpec, ...]]] = {}
"""A tool set's schema estimate by its specs' identities (kept alive beside it): the same
few sets go with every call, and a spec does not change once made."""
_SCHEMA_SETS = 64


def _schema_estimate(tools: Sequence[ToolSpec]) -> int:
    key = tuple(id(tool) for tool in tools)
    known = _SCHEMA_ESTIMATES.get(key)
    if known is None:
        if len(_SCHEMA_ESTIMATES) >= _SCHEMA_SETS:  # tool sets came and went: start over
            _SCHEMA_ESTIMATES.clear()
        known = (estimate_tool_schema_tokens([t.schema() for t in tools]), tuple(tools))
        _SCHEMA_ESTIMATES[key] = known
    return known[0]


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


@dataclass(frozen=True, slots=True, kw_only=True)
class CallReport:
    """What a call's `ModelCalled` says besides the call itself (the ledger line's context):
    whose turn, which step, our estimate of the request, and the window's state."""

    session: SessionInfo
    turn_id: str
    tokens: RequestTokens
    fixed_tokens: int
    purpose: Literal["turn", "compaction", "judge", "catchup", "job"] = "turn"
    iteration: int = 0
    final: bool = False
    trims: tuple[HistoryTrimmed, ...] = ()
    budget: int = 0
    history_budget: int = 0
    kept_turns: int = 0
    dropped_turns: int = 0


BeforeSend = Callable[[LLMRequest, RequestNeeds, ModelRoute], Awaitable[None]]
"""Runs right before a request is sent to a route (spend limits, at its prices); raising
stops it."""


class ModelCaller:
    """Makes every model call, whatever its purpose (a turn's step, its final answer, a
    summary): one capacity check (`check_request`), one cache plan (where the session's
    previous request wrote the cache), one deadline, one `ModelCalled` on the bus for every
    attempt, answered, refused or never sent."""

    def __init__(
        self,
        *,
        bus: EventBus,
        clock: Clock,
        limits: RuntimeLimits,
        deadline_seconds: float | None = None,
        read_points: ReadPoints | None = None,
        chains: RouteChains | None = None,
        correction: Callable[[str, str], TokenCorrection] | None = None,
    ) -> None:
        self.bus = bus
        self.clock = clock
        self.limits = limits
        self.deadline_seconds = deadline_seconds
        self.read_points = read_points if read_points is not None else ReadPoints()
        """Where each session's requests wrote the cache (the next request reads there)."""
        self.chains = chains
        """The profiles' fallback chains (None: no profile has one)."""
        self.correction = correction or (lambda profile, model: NO_CORRECTION)
        """The learned token correction of a route (profile, model): a fallback's measure."""

    def fits(self, needs: RequestNeeds, route: ModelRoute, *, within: int | None = None) -> bool:
        try:
            check_request(needs, route, self.limits, within=within)
        except CapacityExceeded:
            return False
        return True

    async def send(
        self,
        route: ModelRoute,
        messages: tuple[ChatMessage, ...],
        *,
        tools: tuple[ToolSpec, ...],
        needs: RequestNeeds,
        report: CallReport,
        current: int | None,
        tool_choice: Literal["auto", "none"] | None = None,
        max_output_tokens: int | None = None,
        within: int | None = None,
        before_send: BeforeSend | None = None,
        on_text: TextSink | None = None,
    ) -> LLMResponse:
        """Send `messages` to `route` (`current`: where the current message sits, for the
        cache plan) and return the answer. Raises what stopped it, after publishing the
        attempt: `CapacityExceeded` (never sent), what `before_send` raised (never sent),
        `ProviderUnavailable` past the deadline, any other `ProviderError`.

        With a fallback chain, a route that is down (`falls_back`) hands the call to the
        next one while no text of the answer has reached `on_text`; each attempt is
        planned for its route and published on its own. What the last route raised is
        raised (the first route's failure when no fallback could take the call)."""
        chains = self.chains
        if chains is None or not chains.in_chain(route):
            return await self._send_one(
                route,
                messages,
                tools=tools,
                needs=needs,
                report=report,
                current=current,
                tool_choice=tool_choice,
                max_output_tokens=max_output_tokens,
                within=within,
                before_send=before_send,
                on_text=on_text,
            )
        session_id = report.session.id
        shown = _Shown(on_text)
        failure: Exception | None = None
        too_small: CapacityExceeded | None = None
        for candidate in chains.candidates(session_id, route):
            planned = own_reasoning(messages, candidate.model)
            planned_needs = needs
            own = (candidate.profile, candidate.model) == (route.profile, route.model)
            if not own:
                correction = self.correction(candidate.profile, candidate.model)
                planned_needs = request_needs(planned, tools, candidate, correction)
            try:
                response = await self._send_one(
                    candidate,
                    planned,
                    tools=tools,
                    needs=planned_needs,
                    report=report,
                    current=current,
                    tool_choice=tool_choice,
                    max_output_tokens=max_output_tokens,
                    within=within,
                    before_send=before_send,
                    on_text=shown.sink if on_text is not None else None,
                )
            except CapacityExceeded as exc:
                if own:
                    raise  # the route the call was planned for: the turn's own check
                too_small = too_small or exc
                continue  # this fallback's window is too small for the request
            except ProviderError as exc:
                if not falls_back(exc):
                    raise
                chains.failed(candidate)
                if shown.shown:
                    raise  # part of the answer is on the screen: no second author
                failure = failure or exc
                continue
            chains.answered(session_id, candidate)
            return response
        raise failure or too_small or CapacityExceeded("no route of the chain took the call")

    async def _send_one(
        self,
        route: ModelRoute,
        messages: tuple[ChatMessage, ...],
        *,
        tools: tuple[ToolSpec, ...],
        needs: RequestNeeds,
        report: CallReport,
        current: int | None,
        tool_choice: Literal["auto", "none"] | None = None,
        max_output_tokens: int | None = None,
        within: int | None = None,
        before_send: BeforeSend | None = None,
        on_text: TextSink | None = None,
    ) -> LLMResponse:
        """One attempt on one route (`send`'s)."""
        session = report.session
        cache = plan_cache(
            messages,
            current=current,
            previous=self.read_points.get(session.id, route.model),
            session_key=session_cache_key(session.id),
            digests=route.marks_cache,
        )
        request = LLMRequest(
            model=route.model,
            messages=messages,
            tools=tools,
            tool_choice=tool_choice,
            max_output_tokens=max_output_tokens,
            cache_plan=cache.plan,
        )
        published = _Publisher(self, route, report, needs.exact)
        try:
            check_request(needs, route, self.limits, within=within)
        except CapacityExceeded as exc:
            await published(None, None, exc, request)
            raise
        if before_send is not None:
            try:
                await before_send(request, needs, route)
            except Exception as exc:
                await published(None, None, exc, None)
                raise
        started = time.perf_counter()
        deadline = self.deadline_seconds
        try:
            async with asyncio.timeout(deadline):
                if on_text is None:
                    response = await route.provider.complete(request)
                else:  # a streaming provider feeds the live draft
                    response = await route.provider.complete(request, on_text=on_text)
        except TimeoutError as exc:
            late = ProviderUnavailable(f"no complete answer within {deadline:g} s")
            await published(None, started, late, None)
            raise late from exc
        except ProviderError as exc:
            await published(None, started, exc, request)
            raise
        self.read_points.remember(session.id, route.model, cache.remember)
        await published(response, started, None, request)
        return response


@dataclass(frozen=True, slots=True)
class _Publisher:
    """Publishes one attempt of a call as `ModelCalled`."""

    caller: ModelCaller
    route: ModelRoute
    report: CallReport
    exact: int | None

    async def __call__(
        self,
        response: LLMResponse | None,
        started: float | None,
        error: Exception | None,
        request: LLMRequest | None,
    ) -> None:
        report, clock = self.report, self.caller.clock
        latency = 0 if started is None else int((time.perf_counter() - started) * 1000)
        await self.caller.bus.publish(
            ModelCalled(
                at=clock.now(),
                session=report.session,
                turn_id=report.turn_id,
                iteration=report.iteration,
                final=report.final,
                route=self.route,
                usage=response.usage if response is not None else None,
                tool_calls=len(response.tool_calls) if response is not None else 0,
                error=error,
                latency_ms=latency,
                fixed_tokens=report.fixed_tokens,
                tokens=report.tokens,
                trims=report.trims,
                budget=report.budget,
                history_budget=report.history_budget,
                kept_turns=report.kept_turns,
                dropped_turns=report.dropped_turns,
                purpose=report.purpose,
                exact_tokens=self.exact,
                call_id=new_call_id(clock.now()),
                request=request,
                response=response,
            )
        )


class _Shown:
    """Passes streamed text on and remembers whether any reached the screen's sink."""

    __slots__ = ("_sink", "shown")

    def __init__(self, sink: TextSink | None) -> None:
        self.shown = False
        self._sink = sink

    async def sink(self, text: str) -> None:
        if text:
            self.shown = True
        if self._sink is not None:
            await self._sink(text)

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

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from bot.agent.call_retries import deliverable, failure_key, overflow_room, raised_output_limit
from bot.agent.model_call import (
    BeforeSend,
    CallReport,
    ModelCaller,
    RequestNeeds,
    capacity_window,
    request_needs,
)
from bot.agent.routes import ModelRoute, Prices
from bot.agent.turn import TurnFailed, TurnState
from bot.context.history_trim import trim_to_recent_turns
from bot.context.history_trimmed import HistoryTrimmed
from bot.context.tokens import (
    ensure_token_estimate,
    split_request_tokens,
    system_tokens,
)
from bot.context.turns import remove_orphaned_tool_messages
from bot.context.window import (
    recovery_target,
)
from bot.domain.messages import ChatMessage
from bot.errors import (
    BudgetExceeded,
    CapacityExceeded,
    ContextOverflow,
    ProviderError,
)
from bot.ports import LLMRequest, LLMResponse, TextSink, ToolSpec
from bot.tools.base import Tool

if TYPE_CHECKING:
    from bot.agent.request import RequestBuilder
    from bot.agent.window import Windows

FINAL_CALL_NOTE = (
    "[Tool results] The tool-call limit of this turn is reached. "
    "Answer now with what you have, without calling tools."
)


class SpendCheck(Protocol):
    """Spend limits (`bot.agent.spend.SpendGuard`): holds a call's bounded cost on every
    limited budget right before it is sent, or raises `BudgetExceeded`."""

    async def before_call(
        self,
        state: TurnState,
        request: LLMRequest,
        *,
        input_tokens: int,
        prices: Prices | None = None,
    ) -> None: ...


class ProviderCaller:
    """Makes the model calls of a turn: the proactive trim, the call, one overflow recovery,
    one retry of an answer cut at its output limit. `tools` is the runner's live tool
    table; `layout` lays the request out again after the window shrank."""

    def __init__(
        self,
        *,
        caller: ModelCaller,
        windows: Windows,
        tools: dict[str, Tool],
        layout: RequestBuilder,
        max_output_tokens: int | None = None,
        spend: SpendCheck | None = None,
    ) -> None:
        self.caller = caller
        self.windows = windows
        """The window owner: it cuts a turn's window (`drop_oldest`)."""
        self.tools = tools
        """The live tool table: MCP reloads and tests add to it."""
        self.layout = layout
        self.max_output_tokens = max_output_tokens
        self.spend = spend
        """Spend limits, checked before each call is sent (None: no limits)."""

    async def call(
        self, state: TurnState, *, final: bool, on_text: TextSink | None = None
    ) -> LLMResponse:
        """One model call of the turn; `final` asks for the answer without tools (the
        tool-call cap is reached). Raises `TurnFailed` when the call cannot succeed.

        The final call still sends the tool schemas, with `tool_choice: "none"`: the schemas
        lead the cached prefix on every provider, so dropping them would make this call
        miss the cache on the whole request (and, on a breakpoint cache, write it again)."""
        key = state.window.session.key
        offered = self.layout.offered(state.window.session.scene, key.chat_id, key.thread_id)
        tools = tuple(t.spec for t in offered.values())
        if final:
            state.messages.append(
                ensure_token_estimate(ChatMessage(role="user", content=FINAL_CALL_NOTE))
            )
        window = state.window
        if window.budget > 0:
            # the budget holds the whole request, so the messages get what the tool
            # schemas leave (with an honoured max_context_tokens it is also the window);
            # the budget is in real tokens, the trim in estimate units
            schemas = state.layout.fixed_tokens - system_tokens(state.messages)
            budget = window.correction.to_estimate(window.budget) - schemas
            await self._trim(state, max(1, budget), reason="token_budget")
        await self._flush_trims(state)
        limit, _ = capacity_window(state.window.route, self.caller.limits)
        attempt = _Attempt(output_limit=self.max_output_tokens)
        while True:
            response = await self._attempt(state, tools, final, attempt, on_text)
            if response is not None:
                return response
            if attempt.overflowed:  # the overflow path: the window shrinks once
                if attempt.recovered or not await self._recover(state):
                    raise TurnFailed("overflow", attempt.overflow_detail)
                attempt.recovered, attempt.overflowed = True, False
                await self._flush_trims(state)
                continue
            assert attempt.cut is not None
            larger = (
                None
                if attempt.raised
                else raised_output_limit(attempt.output_limit, attempt.cut, limit)
            )
            if larger is None:
                raise TurnFailed("length", "the answer was cut at the output limit")
            attempt.raised, attempt.output_limit, attempt.cut = True, larger, None

    async def _attempt(
        self,
        state: TurnState,
        tools: tuple[ToolSpec, ...],
        final: bool,
        attempt: _Attempt,
        on_text: TextSink | None,
    ) -> LLMResponse | None:
        """One attempt: the answer, or None when it overflowed the window or was cut at its
        output limit with nothing to deliver (`attempt` says which)."""
        # the last safety net: whatever a trim or a stored history left, the provider
        # never receives a tool result without its call (or a call without its result)
        messages = remove_orphaned_tool_messages(state.messages)
        window = state.window
        # the window is real tokens: so is what must fit (`request_needs`)
        needs = request_needs(messages, tools, state.window.route, window.correction)
        report = CallReport(
            session=state.window.session,
            turn_id=state.turn_id,
            tokens=split_request_tokens(state.messages, state.layout.current_index),
            fixed_tokens=state.layout.fixed_tokens,
            purpose="turn" if state.task is None else "job",
            iteration=state.iteration,
            final=final,
            trims=tuple(window.trims),
            budget=window.budget,
            history_budget=window.history_budget,
            kept_turns=state.layout.kept_turns,
            dropped_turns=window.dropped_turns,
        )
        # every trim made since the previous call is reported with this one: done with
        window.trims.clear()
        state.published = 0
        try:
            response = await self.caller.send(
                state.window.route,
                messages,
                tools=tools,
                needs=needs,
                report=report,
                current=_current(state, messages),
                tool_choice="none" if final and tools else None,
                max_output_tokens=attempt.output_limit,
                within=state.refused,
                before_send=self._spend_check(state),
                on_text=on_text,
            )
        except CapacityExceeded as exc:
            raise TurnFailed("capacity", str(exc)) from exc
        except BudgetExceeded as exc:
            raise TurnFailed(
                "budget", str(exc), notice=exc.notice, silent=exc.notice is None
            ) from exc
        except ContextOverflow as exc:
            # no later request of the turn reaches what was just refused
            state.refused = overflow_room(exc, needs.total)
            attempt.overflowed, attempt.overflow_detail = True, f"context overflow: {exc}"
            return None
        except ProviderError as exc:
            raise TurnFailed(failure_key(exc), f"{type(exc).__name__}: {exc}") from exc
        if response.stop == "context":  # stopped at the window: the overflow path
            state.refused = needs.total
            attempt.overflowed = True
            attempt.overflow_detail = "the answer stopped at the context window"
            return None
        if response.stop == "length" and not deliverable(response):
            attempt.cut = response
            return None
        return response

    def _spend_check(self, state: TurnState) -> BeforeSend | None:
        spend = self.spend
        if spend is None:
            return None

        async def check(request: LLMRequest, needs: RequestNeeds, route: ModelRoute) -> None:
            # priced at the route that takes the call (a fallback's own prices)
            await spend.before_call(state, request, input_tokens=needs.total, prices=route.prices)

        return check

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
        """Ask the window to drop the fewest oldest whole turns until the request fits
        `budget`, laying the request out again after each cut (a re-rendered first message
        is a little longer, so it may take a second cut). Records one `HistoryTrimmed`;
        False when nothing went."""
        window = state.window
        tokens_before = state.messages.tokens
        turns = messages = 0
        while True:
            plan = trim_to_recent_turns(state.messages, budget, crumb_present=window.crumb)
            if not plan.trimmed or plan.dropped_turns == 0:
                break
            before = state.layout.history_end - state.layout.history_start
            dropped = await self.windows.folds.drop_oldest(
                window, plan.dropped_turns, within=state.refused
            )
            if dropped == 0:
                break
            state.lay_out(self.layout)
            turns += dropped
            messages += before - (state.layout.history_end - state.layout.history_start)
        if turns == 0:
            return False
        window.trims.append(
            HistoryTrimmed(
                dropped_messages=messages,
                dropped_turns=turns,
                kept_turns=state.layout.kept_turns,
                reason=reason,
                tokens_before=tokens_before,
                tokens_after=state.messages.tokens,
                budget=budget,
                session=state.window.session.id,
                turn_id=state.turn_id,
            )
        )
        return True

    async def _flush_trims(self, state: TurnState) -> None:
        """Publish the trims not yet published; the next call reports them all."""
        trims = state.window.trims
        for event in trims[state.published :]:
            await self.caller.bus.publish(event)
        state.published = len(trims)


@dataclass(slots=True)
class _Attempt:
    """How the attempts of one turn call went so far."""

    output_limit: int | None
    recovered: bool = False
    """The window already shrank once after an overflow."""
    overflowed: bool = False
    overflow_detail: str = ""
    raised: bool = False
    """The output limit was already raised once."""
    cut: LLMResponse | None = None
    """The last answer, cut at its output limit with nothing to deliver."""


def _current(state: TurnState, messages: tuple[ChatMessage, ...]) -> int | None:
    """Where the current message sits in `messages`, found by identity (an orphan repair
    may have shifted it); None when it is not a member's message."""
    if state.layout.current_index < len(state.messages):
        held = state.messages[state.layout.current_index]
        if held.role == "user":
            return next((i for i, m in enumerate(messages) if m is held), None)
    return None

"""The turn runtime: window, per-turn context, provider calls, tools, delivery, ledger.

One `run_turn` answers the newest message of a session. Order of work per turn:
load the window's records → select the window (moves in chunks, persisted) → project
(headers, quotes, old tool results shrunk) with per-turn blocks on the current message only
→ proactive trim to the runtime budget → capacity check → provider call (overflow: trim to
two thirds and retry once) → tools (aliases rewritten first; call + results stored together)
→ … → final answer delivered and stored with its confirmed bubble ids.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, tzinfo
from typing import Literal

from bot.agent.events import EventBus
from bot.agent.ledger import LedgerEntry, LedgerWriter, TrimInfo, describe_error
from bot.agent.prompt import PromptFacts, TurnContext, build_per_turn_blocks, build_system_prompt
from bot.agent.routes import ModelRoute, RouteTable
from bot.context.alias_table import AliasTable
from bot.context.budget import RuntimeLimits
from bot.context.escaping import strip_echoed_header
from bot.context.history_trim import (
    HistoryTrimmed,
    TrimResult,
    breadcrumb_message,
    trim_to_recent_turns,
)
from bot.context.projection import PER_TURN_SEPARATOR, Projection, project, record_tokens
from bot.context.tokens import (
    IMAGE_TOKEN_ESTIMATE,
    compute_message_tokens,
    estimate_history_tokens,
    estimate_message_tokens,
    estimate_text_tokens,
)
from bot.context.tool_results import truncate_tool_result
from bot.context.window import (
    WindowLimits,
    check_capacity,
    estimate_tool_schema_tokens,
    recovery_target,
    select_window,
)
from bot.domain.ids import Scene
from bot.domain.messages import ChatMessage, ToolCall
from bot.domain.records import (
    AssistantRecord,
    StoredRecord,
    ToolResult,
    ToolResultsRecord,
    UserRecord,
)
from bot.errors import (
    CapacityExceeded,
    ContextOverflow,
    ProviderError,
    ProviderRateLimited,
    ProviderUnavailable,
    ReferenceNotConfirmed,
    TelegramError,
    ToolError,
)
from bot.ports import (
    Clock,
    Delivery,
    HistoryStore,
    LLMRequest,
    LLMResponse,
    Messenger,
    NewRecord,
    PlatformEvent,
    PlatformEventStore,
    SessionInfo,
)
from bot.tools.base import Tool, ToolContext

log = logging.getLogger("tgbot.runtime")

Locale = Literal["zh", "en"]
TOOL_TIMEOUT_SECONDS = 30.0
MAX_METERS = 10_000


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnPolicy:
    """Everything a turn needs from the settings, as plain values."""

    scene_budgets: Mapping[Scene, int]
    max_turns: int = 50
    max_messages: int = 100
    headroom: float = 0.25
    limits: RuntimeLimits = field(default_factory=lambda: RuntimeLimits(max_context_tokens=None))
    max_tool_iterations: int = 10
    max_tool_result_chars: int = 50_000
    max_output_tokens: int | None = None
    locale: Locale = "zh"
    zone: tzinfo
    zone_name: str = "UTC"
    command_prefix: str = "/"
    workspace_rules: str = ""

    @property
    def max_records(self) -> int:
        """How many records to load: the message cap plus room for tool rows."""
        return self.max_messages * 2 + 20


@dataclass(frozen=True, slots=True, kw_only=True)
class CallMeter:
    """What `/context` shows about the last model call of a session."""

    model: str
    window: int | None
    budget: int
    history_budget: int
    estimated_input: int
    reported_input: int | None
    cached_tokens: int | None
    kept_turns: int
    dropped_turns: int
    at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnOutcome:
    status: Literal["answered", "failed", "empty"]
    text: str = ""
    delivery: Delivery | None = None
    iterations: int = 0
    hit_iteration_cap: bool = False
    error: str | None = None


class TurnFailed(Exception):
    """Ends a turn with one clear message for the user."""

    def __init__(self, user_message_key: str, detail: str) -> None:
        super().__init__(detail)
        self.key = user_message_key
        self.detail = detail


USER_MESSAGES: dict[Locale, dict[str, str]] = {
    "zh": {
        "overflow": "这段对话太长，模型放不下了。请发 /retry 重试，或换一个上下文更大的模型。",
        "capacity": "这次请求超出了模型的上下文容量，没有发送。请缩短消息或换一个更大的模型。",
        "provider": "模型暂时不可用，请稍后再试。",
        "bad_response": "模型返回了无法理解的结果，请稍后再试。",
    },
    "en": {
        "overflow": "This conversation no longer fits the model. Send /retry, or switch to a "
        "model with a larger context window.",
        "capacity": "This request does not fit the model's context window and was not sent. "
        "Shorten the message or choose a larger model.",
        "provider": "The model is unavailable right now. Please try again in a moment.",
        "bad_response": "The model sent a reply I could not read. Please try again.",
    },
}


@dataclass(slots=True)
class _TurnState:
    """Mutable bookkeeping of one turn (never shared between turns)."""

    session: SessionInfo
    route: ModelRoute
    turn_id: str
    messages: list[ChatMessage]
    crumb: bool
    current_index: int
    fixed_tokens: int
    budget: int
    history_budget: int
    kept_turns: int
    dropped_turns: int = 0
    pending_trims: list[HistoryTrimmed] = field(default_factory=list)
    published_trims: int = 0
    iteration: int = 0


class TurnRunner:
    """Answers the newest message of a session. Turns of one session must not overlap:
    the caller serialises them (one lock per session)."""

    def __init__(
        self,
        *,
        store: HistoryStore,
        events: PlatformEventStore,
        messenger: Messenger,
        routes: RouteTable,
        tools: Sequence[Tool],
        ledger: LedgerWriter,
        clock: Clock,
        policy: TurnPolicy,
        bus: EventBus | None = None,
        bot_id: int | None = None,
        bot_name: str = "tgbot",
    ) -> None:
        self.store = store
        self.events = events
        self.messenger = messenger
        self.routes = routes
        self.tools = {tool.spec.name: tool for tool in tools}
        self.ledger = ledger
        self.clock = clock
        self.policy = policy
        self.bus = bus or EventBus()
        self.bot_id = bot_id
        self.bot_name = bot_name
        self.meters: OrderedDict[int, CallMeter] = OrderedDict()
        """The last call of the most recently active sessions (for `/context`)."""

    # ------------------------------------------------------------------ building

    def system_prompt(self, scene: Scene) -> str:
        return build_system_prompt(
            PromptFacts(
                bot_name=self.bot_name,
                scene=scene,
                locale=self.policy.locale,
                tool_names=tuple(self.tools),
                workspace_rules=self.policy.workspace_rules,
                tool_index=tuple(t.summary for t in self.tools.values() if t.summary),
            )
        )

    def _project(
        self,
        records: Sequence[StoredRecord],
        session: SessionInfo,
        blocks: str,
        quote_targets: Mapping[int, str],
    ) -> Projection:
        return project(
            records,
            current_index=_current_record(records),
            scene=session.scene,
            zone=self.policy.zone,
            locale=self.policy.locale,
            bot_user_id=self.bot_id,
            per_turn_blocks=blocks,
            quote_targets=quote_targets,
            chat_id=session.key.chat_id,
        )

    async def _quote_targets(
        self, session: SessionInfo, records: Sequence[StoredRecord]
    ) -> dict[int, str]:
        """Aliases of quoted messages that are not in `records` (the window), so an inline
        quote line names them by alias, the same way on every call."""
        shown = {mid for record in records for mid in record.message_ids if mid is not None}
        quoted = set()
        for record in records:
            quote = record.body.quote if isinstance(record.body, UserRecord) else None
            if quote is not None and quote.chat_id in (None, session.key.chat_id):
                quoted.add(quote.id)
        missing = quoted - shown
        return await self.store.find_aliases(session.id, missing) if missing else {}

    async def prepare(
        self,
        session: SessionInfo,
        *,
        turn_id: str,
        told_user: Sequence[str] = (),
        persist_window: bool = True,
    ) -> tuple[_TurnState, AliasTable, list[StoredRecord]]:
        """Everything up to the first provider call: window, projection, proactive trim.

        `persist_window=False` previews without storing a moved window start
        (`tgbot context show` is read-only). The turn works with the session as loaded with
        its history (route, scene and window as stored now), not as the caller last saw it."""
        loaded = await self.store.load_history(session.id, max_records=self.policy.max_records)
        session = loaded.session
        route = self.routes.resolve(session.route)
        records = list(loaded.records)
        has_earlier = loaded.has_earlier
        history_budget = self.policy.scene_budgets.get(session.scene, 0)
        limits = WindowLimits(
            token_budget=history_budget,
            max_turns=self.policy.max_turns,
            max_messages=self.policy.max_messages,
            headroom=self.policy.headroom,
        )
        blocks = build_per_turn_blocks(
            TurnContext(
                now=self.clock.now(),
                zone=self.policy.zone,
                zone_name=self.policy.zone_name,
                model=route.model,
                scene=session.scene,
                locale=self.policy.locale,
                command_prefix=self.policy.command_prefix,
                told_user=told_user,
            )
        )
        targets = await self._quote_targets(session, records)
        projection = self._project(records, session, blocks, targets)
        turn_tokens, turn_messages, starts = _turn_costs(_without_blocks(projection, blocks))
        decision = select_window(turn_tokens, turn_messages, 0, limits)
        window_event: HistoryTrimmed | None = None
        if decision.moved and starts:
            cut = projection.record_index[starts[decision.start]]
            targets = await self._quote_targets(session, records[cut:])
            records = records[cut:]
            has_earlier = True
            if persist_window:
                await self.store.set_window_start(session.id, records[0].id)
            window_event = HistoryTrimmed.from_window(
                decision, budget=history_budget, session=session.id, turn_id=turn_id
            )
            projection = self._project(records, session, blocks, targets)
        aliases = AliasTable()
        for alias, message_id in projection.aliases:
            aliases.register(alias, session.key.chat_id, message_id)
        # Only quotes the projection showed by platform id: never a quote from another
        # chat (its id means nothing here), never one the model was not shown.
        for message_id in projection.references:
            aliases.register_reference(message_id)
        system = ChatMessage(role="system", content=self.system_prompt(session.scene))
        head = [_cached(system)]
        if has_earlier:
            head.append(_cached(breadcrumb_message()))
        messages = head + list(projection.messages)
        current = len(head) + (
            projection.current_message_index
            if projection.current_message_index is not None
            else len(projection.messages)
        )
        fixed = estimate_message_tokens(head[0]) + estimate_tool_schema_tokens(
            [_schema(t) for t in self.tools.values()]
        )
        state = _TurnState(
            session=session,
            route=route,
            turn_id=turn_id,
            messages=messages,
            crumb=has_earlier,
            current_index=current,
            fixed_tokens=fixed,
            budget=self.policy.limits.effective_context_budget(route.window),
            history_budget=history_budget,
            kept_turns=len(_turn_costs(projection.messages)[2]),
            dropped_turns=decision.dropped_turns if decision.moved else 0,
        )
        if window_event is not None:
            state.pending_trims.append(window_event)
        return state, aliases, records

    # ------------------------------------------------------------------ the turn

    async def run_turn(
        self, session: SessionInfo, *, reply_to: int | None, told_user: Sequence[str] = ()
    ) -> TurnOutcome:
        turn_id = uuid.uuid4().hex[:12]
        state, aliases, records = await self.prepare(session, turn_id=turn_id, told_user=told_user)
        session = state.session
        tool_ctx = ToolContext(
            chat_id=session.key.chat_id,
            thread_id=session.key.thread_id,
            bot_id=self.bot_id,
            bot_name=self.bot_name,
            clock=self.clock,
            messenger=self.messenger,
            events=self.events,
            records=records,
            record_bubbles=self.events.record_events,
        )
        hit_cap = False
        try:
            while True:
                state.iteration += 1
                final = state.iteration > self.policy.max_tool_iterations
                hit_cap = final
                response = await self._call_model(state, final=final, hit_cap=hit_cap)
                if response.tool_calls and not final:
                    await self._run_tools(state, response, aliases, tool_ctx)
                    continue
                return await self._deliver(state, response, reply_to, hit_cap)
        except TurnFailed as failure:
            log.warning("turn %s failed: %s", turn_id, failure.detail)
            text = USER_MESSAGES[self.policy.locale][failure.key]
            delivery = await self.messenger.send_text(
                session.key.chat_id, text, thread_id=session.key.thread_id, reply_to=reply_to
            )
            return TurnOutcome(
                status="failed",
                text=text,
                delivery=delivery,
                iterations=state.iteration,
                hit_iteration_cap=hit_cap,
                error=failure.detail,
            )

    async def _call_model(self, state: _TurnState, *, final: bool, hit_cap: bool) -> LLMResponse:
        tools = () if final else tuple(t.spec for t in self.tools.values())
        if final:
            state.messages.append(
                _cached(
                    ChatMessage(
                        role="user",
                        content="[Tool results] The tool-call limit of this turn is reached. "
                        "Answer now with what you have, without calling tools.",
                    )
                )
            )
        self._proactive_trim(state)
        await self._flush_trims(state)
        fixed = state.fixed_tokens if not final else _system_tokens(state.messages)
        recovered = False
        while True:
            request = LLMRequest(
                model=state.route.model,
                messages=tuple(state.messages),
                tools=tools,
                max_output_tokens=self.policy.max_output_tokens,
            )
            try:
                check_capacity(
                    message_tokens=estimate_history_tokens(state.messages) - _image_tokens(state),
                    tool_schema_tokens=fixed - _system_tokens(state.messages),
                    image_tokens=_image_tokens(state),
                    window=state.route.window_for_math,
                    model=state.route.model,
                )
            except CapacityExceeded as exc:
                self._write_ledger(state, None, 0.0, error=exc, hit_cap=hit_cap, final=final)
                raise TurnFailed("capacity", str(exc)) from exc
            started = time.perf_counter()
            try:
                response = await state.route.provider.complete(request)
            except ContextOverflow as exc:
                self._write_ledger(state, None, started, error=exc, hit_cap=hit_cap, final=final)
                if recovered or not self._recover(state):
                    raise TurnFailed("overflow", f"context overflow: {exc}") from exc
                recovered = True
                await self._flush_trims(state)
                continue
            except ProviderError as exc:
                self._write_ledger(state, None, started, error=exc, hit_cap=hit_cap, final=final)
                transient = isinstance(exc, ProviderUnavailable | ProviderRateLimited)
                key = "provider" if transient else "bad_response"
                raise TurnFailed(key, f"{type(exc).__name__}: {exc}") from exc
            self._write_ledger(state, response, started, error=None, hit_cap=hit_cap, final=final)
            return response

    def _proactive_trim(self, state: _TurnState) -> None:
        if state.budget <= 0:
            return
        result = trim_to_recent_turns(state.messages, state.budget, crumb_present=state.crumb)
        if result.trimmed:
            self._apply_trim(state, result, reason="token_budget", budget=state.budget)

    def _recover(self, state: _TurnState) -> bool:
        estimate = estimate_history_tokens(state.messages)
        target = recovery_target(estimate)
        result = trim_to_recent_turns(state.messages, target, crumb_present=state.crumb)
        if not result.trimmed or result.dropped_turns == 0:
            return False
        self._apply_trim(state, result, reason="overflow_recovery", budget=target)
        return True

    def _apply_trim(
        self,
        state: _TurnState,
        result: TrimResult,
        *,
        reason: Literal["token_budget", "overflow_recovery"],
        budget: int,
    ) -> None:
        messages = list(result.messages)
        dropped = len(state.messages) - len(messages)
        if not state.crumb:
            system_count = sum(1 for m in messages[:1] if m.role == "system")
            messages.insert(system_count, _cached(breadcrumb_message()))
            state.crumb = True
            dropped -= 1
        state.messages = messages
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

    async def _flush_trims(self, state: _TurnState) -> None:
        """Publish the trims not yet published; the next ledger line records the last one."""
        for event in state.pending_trims[state.published_trims :]:
            await self.bus.publish(event)
        state.published_trims = len(state.pending_trims)

    # ------------------------------------------------------------------ tools

    async def _run_tools(
        self,
        state: _TurnState,
        response: LLMResponse,
        aliases: AliasTable,
        ctx: ToolContext,
    ) -> None:
        results = [await self._run_tool(call, aliases, ctx) for call in response.tool_calls]
        now = self.clock.now()
        call_body = AssistantRecord(text=response.text, tool_calls=response.tool_calls)
        results_body = ToolResultsRecord(results=tuple(results))
        await self.store.append(
            state.session.id,
            [
                NewRecord(body=call_body, created_at=now, tokens=record_tokens(call_body)),
                NewRecord(body=results_body, created_at=now, tokens=record_tokens(results_body)),
            ],
        )
        state.messages.append(
            _cached(
                ChatMessage(role="assistant", content=response.text, tool_calls=response.tool_calls)
            )
        )
        for result in results:
            state.messages.append(
                _cached(
                    ChatMessage(
                        role="tool",
                        content=result.content,
                        tool_call_id=result.call_id,
                        name=result.name,
                        is_error=result.is_error,
                    )
                )
            )

    async def _run_tool(self, call: ToolCall, aliases: AliasTable, ctx: ToolContext) -> ToolResult:
        def failed(code: str, message: str) -> ToolResult:
            return ToolResult(
                call_id=call.id,
                name=call.name,
                content=f"error[{code}]: {message}",
                is_error=True,
                error_code=code,
            )

        tool = self.tools.get(call.name)
        if tool is None:
            return failed("unknown_tool", f"there is no tool named {call.name!r}")
        try:
            raw = json.loads(call.arguments or "{}")
        except json.JSONDecodeError:
            return failed("bad_arguments", "the arguments are not valid JSON")
        if not isinstance(raw, dict):
            return failed("bad_arguments", "the arguments must be a JSON object")
        try:
            args = aliases.rewrite_arguments(raw)
        except ReferenceNotConfirmed as exc:
            log.info("tool %s: %s (model wrote %s)", call.name, exc, call.arguments)
            return failed("reference_not_confirmed", str(exc))
        log.info("tool %s(%s)", call.name, call.arguments)
        try:
            content = await asyncio.wait_for(tool.run(args, ctx), TOOL_TIMEOUT_SECONDS)
        except ToolError as exc:
            return failed(exc.code, str(exc))
        except TelegramError as exc:
            return failed("telegram", f"{type(exc).__name__}: {exc}")
        except TimeoutError:
            return failed("timeout", f"the tool took longer than {TOOL_TIMEOUT_SECONDS:.0f} s")
        except Exception as exc:  # a tool bug must not crash the turn
            log.exception("tool %s crashed", call.name)
            return failed("internal", type(exc).__name__)
        return ToolResult(
            call_id=call.id,
            name=call.name,
            content=truncate_tool_result(content, self.policy.max_tool_result_chars),
        )

    # ------------------------------------------------------------------ delivery

    async def _deliver(
        self, state: _TurnState, response: LLMResponse, reply_to: int | None, hit_cap: bool
    ) -> TurnOutcome:
        text = strip_echoed_header(response.text).strip()
        if not text:
            raise TurnFailed("bad_response", "the model's reply was empty after cleaning")
        key = state.session.key
        recorder = _BubbleRecorder(self, state.session, reply_to)
        delivery = await self.messenger.send_text(
            key.chat_id, text, thread_id=key.thread_id, reply_to=reply_to, on_bubble=recorder
        )
        await recorder.settle(delivery)
        if not delivery.delivered:
            log.warning("reply not delivered in chat %s: %s", key.chat_id, delivery.error)
        return TurnOutcome(
            status="answered" if delivery.delivered else "failed",
            text=text,
            delivery=delivery,
            iterations=state.iteration,
            hit_iteration_cap=hit_cap,
            error=None if delivery.delivered else str(delivery.error),
        )

    def bubble_events(
        self,
        session: SessionInfo,
        delivery: Delivery,
        *,
        reply_to: int | None,
        record_id: int | None,
        slots: range | None = None,
    ) -> list[PlatformEvent]:
        """Platform events of the confirmed bubbles of `delivery` (only `slots` if given)."""
        return delivery.events(
            chat_id=session.key.chat_id,
            thread_id=session.key.thread_id,
            sender_id=self.bot_id,
            sender_name=self.bot_name,
            reply_to=reply_to,
            now=self.clock.now(),
            record_id=record_id,
            slots=slots,
        )

    # ------------------------------------------------------------------ ledger

    def _write_ledger(
        self,
        state: _TurnState,
        response: LLMResponse | None,
        started: float,
        *,
        error: Exception | None,
        hit_cap: bool,
        final: bool,
    ) -> None:
        images = _image_tokens(state)
        history = sum(
            estimate_message_tokens(m)
            for m in state.messages[: state.current_index]
            if m.role != "system"
        )
        current = sum(estimate_message_tokens(m) for m in state.messages[state.current_index :])
        usage = response.usage if response is not None else None
        trim = state.pending_trims[-1] if state.pending_trims else None
        prices = state.route.prices
        cost = prices.cost(usage) if usage is not None else None
        entry = LedgerEntry(
            ts=self.clock.now(),
            session=state.session.id,
            chat=state.session.key.chat_id,
            thread=state.session.key.thread_id,
            scene=state.session.scene,
            turn_id=state.turn_id,
            iteration=state.iteration,
            purpose="final_summary" if final else "turn",
            provider=state.route.provider_name,
            model=state.route.model,
            input_tokens=usage.input_tokens if usage else None,
            cached_tokens=usage.cached_tokens if usage else None,
            output_tokens=usage.output_tokens if usage else None,
            est_fixed=state.fixed_tokens,
            est_history=max(0, history - _image_tokens_of(state.messages[: state.current_index])),
            est_current=max(0, current - _image_tokens_of(state.messages[state.current_index :])),
            est_images=images,
            trim=None
            if trim is None
            else TrimInfo(
                reason=trim.reason,
                dropped_turns=trim.dropped_turns,
                dropped_messages=trim.dropped_messages,
                kept_turns=trim.kept_turns,
                tokens_before=trim.tokens_before,
                tokens_after=trim.tokens_after,
                budget=trim.budget,
            ),
            latency_ms=int((time.perf_counter() - started) * 1000) if started else 0,
            error=None if error is None else describe_error(error),
            hit_iteration_cap=hit_cap,
            cost=cost,
            tool_calls=len(response.tool_calls) if response else 0,
        )
        state.pending_trims.clear()
        state.published_trims = 0
        try:
            self.ledger.append(entry)
        except OSError:
            log.exception("could not write the ledger line")
        self.meters.pop(state.session.id, None)
        while len(self.meters) >= MAX_METERS:
            self.meters.popitem(last=False)
        self.meters[state.session.id] = CallMeter(
            model=state.route.model,
            window=state.route.window,
            budget=state.budget,
            history_budget=state.history_budget,
            estimated_input=state.fixed_tokens + history + current,
            reported_input=usage.input_tokens if usage else None,
            cached_tokens=usage.cached_tokens if usage else None,
            kept_turns=state.kept_turns,
            dropped_turns=state.dropped_turns,
            at=entry.ts,
        )


class _BubbleRecorder:
    """Stores a reply bubble by bubble, as Telegram confirms each one (DESIGN.md §8).

    The first confirmed bubble appends the assistant record (the whole planned text, one
    slot per bubble, unconfirmed slots `None`) with its platform event; each later bubble
    fills its slot (`set_message_ids`) and adds its event. So a crash in the middle of a
    reply leaves every confirmed bubble stored, and the `None` slots tell start-up recovery
    (`InboundService.recover_interrupted`) that the reply was cut short. When delivery stops
    at a failure instead, `settle` replaces the record by a sibling holding only the
    delivered bubbles: undelivered text is never stored as sent.
    """

    def __init__(self, runner: TurnRunner, session: SessionInfo, reply_to: int | None) -> None:
        self.runner = runner
        self.session = session
        self.reply_to = reply_to
        self.record: StoredRecord | None = None
        self.stored = 0

    async def __call__(self, delivery: Delivery) -> None:
        store = self.runner.store
        confirmed = sum(1 for mid in delivery.message_ids if mid is not None)
        if self.record is None:
            body = AssistantRecord(text="\n".join(delivery.texts))
            (self.record,) = await store.append(
                self.session.id,
                [
                    NewRecord(
                        body=body,
                        created_at=self.runner.clock.now(),
                        message_ids=delivery.message_ids,
                        tokens=record_tokens(body),
                    )
                ],
                events=self.runner.bubble_events(
                    self.session, delivery, reply_to=self.reply_to, record_id=None
                ),
            )
        else:
            self.record = await store.set_message_ids(self.record.id, delivery.message_ids)
            await self.runner.events.record_events(
                self.runner.bubble_events(
                    self.session,
                    delivery,
                    reply_to=self.reply_to,
                    record_id=self.record.id,
                    slots=range(self.stored, confirmed),
                )
            )
        self.stored = confirmed

    async def settle(self, delivery: Delivery) -> None:
        """After delivery: keep only what was delivered when it stopped early."""
        if self.record is None or all(mid is not None for mid in delivery.message_ids):
            return
        await settle_partial_reply(
            self.runner, self.session, self.record, delivery, reply_to=self.reply_to
        )


async def settle_partial_reply(
    runner: TurnRunner,
    session: SessionInfo,
    record: StoredRecord,
    delivery: Delivery,
    *,
    reply_to: int | None,
) -> StoredRecord:
    """Replace a partly delivered reply record by a sibling holding the delivered bubbles
    only (a new branch under the same parent, like `/retry`; aliases stay the same)."""
    confirmed = [
        (mid, bubble)
        for mid, bubble in zip(delivery.message_ids, delivery.texts, strict=False)
        if mid is not None
    ]
    body = AssistantRecord(text="\n".join(bubble for _mid, bubble in confirmed))
    ids = tuple(mid for mid, _bubble in confirmed)
    (sibling,) = await runner.store.append(
        session.id,
        [
            NewRecord(
                body=body, created_at=record.created_at, message_ids=ids, tokens=record_tokens(body)
            )
        ],
        parent_id=record.parent_id,
    )
    await runner.events.record_events(
        runner.bubble_events(session, delivery, reply_to=reply_to, record_id=sibling.id)
    )
    return sibling


# ---------------------------------------------------------------------- helpers


def _cached(message: ChatMessage) -> ChatMessage:
    if message.tokens is not None:
        return message
    return replace(message, tokens=compute_message_tokens(message))


def _schema(tool: Tool) -> dict[str, object]:
    return {
        "name": tool.spec.name,
        "description": tool.spec.description,
        "parameters": tool.spec.parameters,
    }


def _system_tokens(messages: Sequence[ChatMessage]) -> int:
    return sum(estimate_message_tokens(m) for m in messages if m.role == "system")


def _image_tokens_of(messages: Sequence[ChatMessage]) -> int:
    return IMAGE_TOKEN_ESTIMATE * sum(len(m.images) for m in messages)


def _image_tokens(state: _TurnState) -> int:
    return _image_tokens_of(state.messages)


def _turn_costs(
    messages: Sequence[ChatMessage],
) -> tuple[list[int], list[int], list[int]]:
    """Per-turn token cost and message count of projected messages, and the turn starts.
    Messages before the first turn start are counted with the first turn."""
    from bot.context.turns import turn_starts

    starts = turn_starts(messages)
    if not starts:
        return [], [], []
    tokens: list[int] = []
    counts: list[int] = []
    bounds = [0, *starts[1:], len(messages)]
    for begin, end in itertools.pairwise(bounds):
        tokens.append(sum(estimate_message_tokens(m) for m in messages[begin:end]))
        counts.append(end - begin)
    return tokens, counts, starts


def _without_blocks(projection: Projection, blocks: str) -> list[ChatMessage]:
    """The projected messages with the current message costed without its per-turn blocks:
    the window budget counts history, not this turn's context."""
    messages = list(projection.messages)
    index = projection.current_message_index
    if index is not None and blocks:
        current = messages[index]
        extra = estimate_text_tokens(PER_TURN_SEPARATOR + blocks)
        messages[index] = replace(current, tokens=max(0, (current.tokens or 0) - extra))
    return messages


def _current_record(records: Sequence[StoredRecord]) -> int | None:
    """The message the turn answers: the newest member message (per-turn context rides on
    it), or the newest record when there is none."""
    for index in range(len(records) - 1, -1, -1):
        if isinstance(records[index].body, UserRecord):
            return index
    return len(records) - 1 if records else None

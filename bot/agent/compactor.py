"""Compaction, the asynchronous part: when to fold, the call, the record.

`Compactor` folds the turns that leave the window into the session's rolling summary:

- After a reply (`after_reply`), in the background: when the next window move is near
  (`bot.context.compaction.predict_cut`), it folds the turns that move will drop, so the
  move itself costs no model call and member turns wait for nothing.
- At a move (`on_move`, called by `RequestBuilder.prepare`): a prepared summary that hangs
  at or after the new start is used as it is (the start moves to it); otherwise the fold
  runs now, synchronously (the fallback).
- The summary request repeats the chat's reply request (system prompt, tool schemas with
  `tool_choice: "none"`, breadcrumb, summary, window, in order) plus one instruction, on
  the configured route (default: the chat's own, whose cache is warm). It is a ledger line
  with `purpose: "compaction"`.
- A failed call (provider error, capacity, empty answer) leaves the breadcrumb alone and
  never fails the member's turn. Nothing is lost by it: the move waits (the turn is sent
  the moved window under the last good summary, but the start is not persisted), so the
  next fold starts from the last good summary's end and covers every record since.

A summary is a record of kind `summary` appended off the active path as a child of the last
record it covers, so it survives restarts and a branch finds the summary of its own path
(`summary_before`).

See docs/context-window.md, The summary.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from bot.agent.events import EventBus, ModelCalled
from bot.agent.provider_call import capacity_window
from bot.agent.routes import ModelRoute, RouteTable
from bot.agent.traces import new_call_id
from bot.context.budget import RuntimeLimits
from bot.context.cache_plan import ReadPoints, plan_cache, session_cache_key
from bot.context.compaction import (
    new_summary,
    plan_fold,
    predict_cut,
    prepared_start_fits,
    summary_request,
)
from bot.context.tokens import estimate_message_tokens, split_request_tokens
from bot.context.window import (
    TurnCosts,
    WindowLimits,
    check_capacity,
    estimate_tool_schema_tokens,
)
from bot.domain.ids import Scene
from bot.domain.messages import ChatMessage
from bot.domain.records import StoredRecord, SummaryRecord
from bot.errors import BotError
from bot.ports import Clock, HistoryStore, LLMRequest, LLMResponse, NewRecord, SessionInfo
from bot.tools.base import Tool

log = logging.getLogger("tgbot.compaction")


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionPolicy:
    """`summary_budgets`: the summary's bound per scene; `route`: where summary calls go
    (None: the chat's own route); `prepare_margin`: how near a move must be to prepare."""

    summary_budgets: Mapping[Scene, int]
    route: str | None = None
    prepare_margin: float = 0.1
    runtime: RuntimeLimits = field(default_factory=RuntimeLimits)
    """The runtime limits: an honoured `max_context_tokens` is the summary call's window too."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FoldView:
    """The window after a reply: records, their turns (`turn_starts[i]` is the record index
    where turn i starts), the limits, the current summary and the reply-shaped messages."""

    session: SessionInfo
    records: list[StoredRecord]
    costs: TurnCosts
    turn_starts: list[int]
    limits: WindowLimits
    summary: SummaryRecord | None
    messages: list[ChatMessage]


@dataclass(frozen=True, slots=True, kw_only=True)
class FoldResult:
    """Where the window starts after a move (a record index) and the summary before it."""

    cut: int
    summary: SummaryRecord | None
    failed: bool = False
    """The fold was due and its call failed: the move waits (the start is not persisted,
    `summary` is the last good one), so the next fold covers it and everything since."""


async def summary_before(
    store: HistoryStore, session: SessionInfo, records: Sequence[StoredRecord]
) -> SummaryRecord | None:
    """The newest summary covering exactly what precedes `records` on this path: one hanging
    under the record right before the window start. None when there is none (a summary call
    failed, compaction is new, or the window starts at the root)."""
    if not records or records[0].parent_id is None:
        return None
    found = await store.find_summaries(session.id, [records[0].parent_id])
    for record in reversed(found):
        if isinstance(record.body, SummaryRecord) and record.body.text:
            return record.body
    return None


class Compactor:
    """Folds departing turns into the summary. `tools` is the runner's live tool table."""

    def __init__(
        self,
        *,
        store: HistoryStore,
        routes: RouteTable,
        tools: Mapping[str, Tool],
        bus: EventBus,
        clock: Clock,
        policy: CompactionPolicy,
        read_points: ReadPoints | None = None,
    ) -> None:
        self.read_points = read_points if read_points is not None else ReadPoints()
        """Shared with the turn calls: a summary request reads what the replies wrote."""
        self.store = store
        self.routes = routes
        self.tools = tools
        self.bus = bus
        self.clock = clock
        self.policy = policy
        self._pending: dict[int, asyncio.Task[None]] = {}
        self.sync_folds = 0
        """Folds a member's turn waited for (the fallback); for the bench."""
        self.prepared_folds = 0
        """Folds prepared after a reply."""

    # ------------------------------------------------------------ at a move

    async def on_move(
        self,
        session: SessionInfo,
        *,
        records: Sequence[StoredRecord],
        cut: int,
        turn_starts: Sequence[int],
        costs: TurnCosts,
        limits: WindowLimits,
        previous: SummaryRecord | None,
        messages: Callable[[], Awaitable[list[ChatMessage]]],
        turn_id: str,
        call_model: bool = True,
    ) -> FoldResult:
        """The new start and summary when the window moves to record `cut` (a turn start;
        `turn_starts[i]` is the record where turn i starts, `costs` what each turn costs).

        A summary prepared at a turn start at or after `cut` (not past the newest turn) is
        used and the start moves to it; so is one a little before `cut` when the window
        from there still keeps half its headroom (`prepared_start_fits`). Else, with
        `call_model`, the fold runs now."""
        await self.settle(session.id)
        if not turn_starts:
            return FoldResult(cut=cut, summary=None)
        newest = turn_starts[-1]
        turn_of = {start: turn for turn, start in enumerate(turn_starts)}
        index = {record.id: i for i, record in enumerate(records)}
        found = await self.store.find_summaries(session.id, [r.id for r in records[:newest]])
        for record in reversed(found):
            at = index.get(record.parent_id or -1, -2) + 1
            body = record.body
            if not (isinstance(body, SummaryRecord) and body.text and at in turn_of):
                continue
            if cut <= at <= newest or (
                0 < at < cut and prepared_start_fits(costs, turn_of[at], limits)
            ):
                return FoldResult(cut=at, summary=body)
        if not call_model or cut <= 0:
            return FoldResult(cut=cut, summary=None)
        self.sync_folds += 1
        summary, failed = await self.fold_or_fail(
            session,
            records=records,
            cut=cut,
            previous=previous,
            messages=await messages(),
            turn_id=turn_id,
        )
        if failed:
            return FoldResult(cut=cut, summary=previous, failed=True)
        return FoldResult(cut=cut, summary=summary)

    # ------------------------------------------------------------ after a reply

    def after_reply(
        self,
        session: SessionInfo,
        view: Callable[[SessionInfo], Awaitable[FoldView]],
        *,
        turn_id: str,
    ) -> None:
        """Prepare the next summary in the background when the next move is near."""
        running = self._pending.get(session.id)
        if running is not None and not running.done():
            return
        task = asyncio.create_task(self._prepare(session, view, turn_id))
        self._pending[session.id] = task

        def forget(done: asyncio.Task[None]) -> None:
            if self._pending.get(session.id) is done:
                del self._pending[session.id]

        task.add_done_callback(forget)

    async def settle(self, session_id: int) -> None:
        """Wait for the session's summary in preparation, if any."""
        task = self._pending.get(session_id)
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(task)

    async def drain(self) -> None:
        """Wait for every summary in preparation."""
        while self._pending:
            tasks = dict(self._pending)
            await asyncio.gather(*tasks.values(), return_exceptions=True)
            for session_id, task in tasks.items():
                if self._pending.get(session_id) is task:
                    del self._pending[session_id]

    async def aclose(self) -> None:
        """Stop preparing (process shutdown)."""
        tasks = list(self._pending.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._pending.clear()

    async def _prepare(
        self,
        session: SessionInfo,
        view_of: Callable[[SessionInfo], Awaitable[FoldView]],
        turn_id: str,
    ) -> None:
        try:
            view = await view_of(session)
            turn = predict_cut(view.costs, view.limits, self.policy.prepare_margin)
            if turn is None:
                return
            cut = view.turn_starts[turn]
            index = {record.id: i for i, record in enumerate(view.records)}
            found = await self.store.find_summaries(view.session.id, [r.id for r in view.records])
            turn_of = {start: turn for turn, start in enumerate(view.turn_starts)}
            for record in found:
                at = index.get(record.parent_id or -1, -2) + 1
                if at >= cut or (
                    at in turn_of and prepared_start_fits(view.costs, turn_of[at], view.limits)
                ):
                    return  # one prepared already would still do for the next move
            self.prepared_folds += 1
            await self.fold(
                view.session,
                records=view.records,
                cut=cut,
                previous=view.summary,
                messages=view.messages,
                turn_id=turn_id,
            )
        except Exception:  # a background task: log, never raise into the loop
            log.exception("preparing the summary of session %s failed", session.id)

    # ------------------------------------------------------------ the call

    async def fold(
        self,
        session: SessionInfo,
        *,
        records: Sequence[StoredRecord],
        cut: int,
        previous: SummaryRecord | None,
        messages: Sequence[ChatMessage],
        turn_id: str,
    ) -> SummaryRecord | None:
        """Fold `records[:cut]` (and `previous`) into a new summary and store it under
        `records[cut - 1]`; None when the call failed or had nothing to say."""
        summary, _failed = await self.fold_or_fail(
            session,
            records=records,
            cut=cut,
            previous=previous,
            messages=messages,
            turn_id=turn_id,
        )
        return summary

    async def fold_or_fail(
        self,
        session: SessionInfo,
        *,
        records: Sequence[StoredRecord],
        cut: int,
        previous: SummaryRecord | None,
        messages: Sequence[ChatMessage],
        turn_id: str,
    ) -> tuple[SummaryRecord | None, bool]:
        """`fold`, and whether a due fold failed (a provider error, the capacity check, an
        empty answer): then nothing may leave the window for good. (None, False) when there
        was nothing to fold (no alias departs, or the scene keeps no summary)."""
        budget = self.policy.summary_budgets.get(session.scene, 0)
        departing = records[:cut]
        plan = plan_fold(departing, previous, budget) if budget > 0 and cut > 0 else None
        if plan is None:
            return None, False
        route = self.routes.resolve(self.policy.route or session.route)
        request_messages = summary_request(
            messages, first=plan.first, last=plan.last, max_tokens=budget
        )
        specs = tuple(tool.spec for tool in self.tools.values())
        # the instruction is the one message nobody repeats: the window before it is read
        # from (and written for) the chat's reply requests
        cache = plan_cache(
            request_messages,
            current=len(request_messages) - 1,
            previous=self.read_points.get(session.id, route.model),
            session_key=session_cache_key(session.id),
        )
        request = LLMRequest(
            model=route.model,
            messages=tuple(request_messages),
            tools=specs,
            max_output_tokens=budget * 2,
            tool_choice="none" if specs else None,
            cache_plan=cache.plan,
        )
        schema_tokens = estimate_tool_schema_tokens([s.schema() for s in specs])
        system = sum(estimate_message_tokens(m) for m in request_messages if m.role == "system")
        called = _Call(
            bus=self.bus,
            clock=self.clock,
            session=session,
            turn_id=turn_id,
            route=route,
            messages=request_messages,
            fixed_tokens=system + schema_tokens,
            budget=budget,
        )
        started = time.perf_counter()
        try:
            window, source = capacity_window(route, self.policy.runtime)
            check_capacity(
                message_tokens=sum(estimate_message_tokens(m) for m in request_messages),
                tool_schema_tokens=schema_tokens,
                image_tokens=0,
                context_window=window,
                model=route.model,
                context_window_known=source == "known",
                honoured=source == "max_context_tokens",
            )
            response = await route.provider.complete(request)
        except (TimeoutError, BotError, OSError) as exc:
            log.warning("summary call for session %s failed: %s", session.id, exc)
            await called.publish(None, started, exc)
            return None, True
        self.read_points.remember(session.id, route.model, cache.remember)
        await called.publish(response, started, None)
        summary = new_summary(response.text, plan=plan, departing=departing, previous=previous)
        if summary is None:
            log.warning("summary call for session %s answered nothing", session.id)
            return None, True
        tokens = estimate_message_tokens(ChatMessage(role="user", content=summary.text))
        await self.store.append(
            session.id,
            [NewRecord(body=summary, created_at=self.clock.now(), tokens=tokens)],
            parent_id=records[cut - 1].id,
            move_leaf=False,
        )
        return summary, False


@dataclass(frozen=True, slots=True, kw_only=True)
class _Call:
    """Publishes one summary call as `ModelCalled` (purpose `compaction`)."""

    bus: EventBus
    clock: Clock
    session: SessionInfo
    turn_id: str
    route: ModelRoute
    messages: Sequence[ChatMessage]
    fixed_tokens: int
    budget: int

    async def publish(
        self, response: LLMResponse | None, started: float, error: Exception | None
    ) -> None:
        await self.bus.publish(
            ModelCalled(
                at=self.clock.now(),
                session=self.session,
                turn_id=self.turn_id,
                iteration=0,
                final=False,
                route=self.route,
                usage=response.usage if response is not None else None,
                tool_calls=0,
                error=error,
                latency_ms=int((time.perf_counter() - started) * 1000),
                fixed_tokens=self.fixed_tokens,
                tokens=split_request_tokens(self.messages, len(self.messages) - 1),
                trims=(),
                budget=0,
                history_budget=self.budget,
                kept_turns=0,
                dropped_turns=0,
                purpose="compaction",
                call_id=new_call_id(self.clock.now()),
                response=response,
            )
        )

"""Compaction, the asynchronous part: the summary call, its record, the summaries
prepared in the background.

`Compactor` does the I/O of compaction; what to do is decided by the pure plan
(`bot.context.window_plan.plan_window`, `predict_cut`;
`bot.context.prepared_summary.usable_summary`), which `bot.agent.window.Windows` runs
between loading the window and projecting it:

- `find_prepared`: the summaries hanging inside a loaded window (a move may start on one).
- `fold_or_fail`: the fold a member's turn waits for at a move (the fallback when none was
  prepared) or at a runtime trim, and the fold made after a reply when the next move is
  near, so the move itself costs no model call. `in_background` runs that preparation;
  `settle` waits for it.
- The summary request repeats the chat's reply request (system prompt, tool schemas with
  `tool_choice: "none"`, breadcrumb, summary, window, in order) plus one instruction, on
  the configured route (default: the chat's own, whose cache is warm). It is a ledger line
  with `purpose: "compaction"`, made by the one model caller (`ModelCaller`).
- A failed call (provider error, capacity, empty answer) never fails the member's turn.
  Nothing is lost by it: the move waits (the start is not persisted), so the next fold
  starts from the last good summary's end and covers every record since. What leaves but
  does not fit one summary request is folded in pieces, oldest turns first
  (`bot.agent.window_fold.WindowFolds.fold`): `FoldResult.too_large` says a piece must shrink.

A summary is a record of kind `summary` appended off the active path as a child of the last
record it covers, so it survives restarts and a branch finds the summary of its own path
(`summary_before`).

See docs/context-window.md, The summary.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from bot.agent.chat_scope import NO_SCOPES, ChatScopes
from bot.agent.model_call import CallReport, ModelCaller, request_needs
from bot.agent.routes import RouteTable
from bot.context.compaction import (
    FoldPlan,
    extractive_summary,
    new_summary,
    plan_fold,
    summary_request,
)
from bot.context.prepared_summary import PreparedSummary, prepared_summaries
from bot.context.tokens import (
    NO_CORRECTION,
    TokenCorrection,
    estimate_message_tokens,
    split_request_tokens,
)
from bot.context.tool_schema_cost import estimate_tool_schema_tokens
from bot.context.window import PerScene
from bot.domain.messages import ChatMessage
from bot.domain.records import StoredRecord, SummaryRecord
from bot.errors import BotError, CapacityExceeded
from bot.ports import Clock, NewRecord, SessionInfo
from bot.store_ports import HistoryStore
from bot.tools.base import Tool

log = logging.getLogger("tgbot.compaction")

FoldReason = Literal["move", "prepare", "trim", "overflow"]


@dataclass(frozen=True, slots=True)
class FoldResult:
    """One fold's outcome: the new summary (None: nothing folded); `failed`: a due fold
    failed, so nothing may leave the window for good; `too_large`: it failed before any
    call because even the request of only what leaves does not fit the window (a smaller
    piece may)."""

    summary: SummaryRecord | None
    failed: bool = False
    too_large: bool = False


async def summary_before(
    store: HistoryStore, session: SessionInfo, records: Sequence[StoredRecord]
) -> SummaryRecord | None:
    """The newest summary covering exactly what precedes `records` on this path: one hanging
    under the record right before the window start. None when there is none (a summary call
    failed, compaction is new, or the window starts at the root)."""
    if not records or records[0].parent_id is None:
        return None
    return newest_summary(await store.find_summaries(session.id, [records[0].parent_id]))


def newest_summary(found: Sequence[StoredRecord]) -> SummaryRecord | None:
    """The newest summary with text among `found` (oldest first)."""
    for record in reversed(found):
        if isinstance(record.body, SummaryRecord) and record.body.text:
            return record.body
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionPolicy:
    """`summary_budgets`: the summary's bound per scene (already held to a quarter of the
    scene's history budget, `bound_summaries`), reserved inside the window's budget;
    `route`: where summary calls go (None: the chat's own route); `prepare_margin`: how
    near a move must be to prepare its summary after a reply."""

    summary_budgets: PerScene[int]
    route: str | None = None
    prepare_margin: float = 0.1


class Compactor:
    """Folds departing turns into the summary. `tools` is the runner's live tool table."""

    def __init__(
        self,
        *,
        store: HistoryStore,
        routes: RouteTable,
        tools: Mapping[str, Tool],
        caller: ModelCaller,
        clock: Clock,
        policy: CompactionPolicy,
        correction: Callable[[str, str], TokenCorrection] | None = None,
        scopes: ChatScopes = NO_SCOPES,
    ) -> None:
        self.scopes = scopes
        """Each chat's tools: the summary call offers what the chat's turns do (one prefix)."""
        self.correction = correction or (lambda provider, model: NO_CORRECTION)
        """The learned token correction of a route (provider, model): the summary call is
        held to the window by the same measure as the turn's calls (`request_needs`)."""
        self.caller = caller
        """The one model caller: a summary request reads the cache the replies wrote."""
        self.store = store
        self.routes = routes
        self.tools = tools
        self.clock = clock
        self.policy = policy
        self._pending: dict[int, asyncio.Task[None]] = {}
        self.sync_folds = 0
        """Folds a member's turn waited for (the fallback); for the bench."""
        self.prepared_folds = 0
        """Folds prepared after a reply."""

    # ------------------------------------------------------------ what is prepared

    async def find_prepared(
        self,
        session: SessionInfo,
        records: Sequence[StoredRecord],
        turn_starts: Sequence[int],
    ) -> tuple[PreparedSummary, ...]:
        """The summaries hanging right before a turn of `records` (`turn_starts[i]`: the
        record index where turn i starts), oldest first."""
        found = await self.store.find_summaries(session.id, [r.id for r in records])
        return prepared_summaries(found, records, turn_starts)

    def preparing(self, session_id: int) -> bool:
        """Whether a summary of the session is being prepared in the background."""
        running = self._pending.get(session_id)
        return running is not None and not running.done()

    def in_background(self, session_id: int, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` (preparing the session's next summary) in the background: one at a
        time per session, failures logged, never raised into the loop."""
        if self.preparing(session_id):
            work.close()
            return
        task = asyncio.create_task(self._logged(session_id, work))
        self._pending[session_id] = task

        def forget(done: asyncio.Task[None]) -> None:
            if self._pending.get(session_id) is done:
                del self._pending[session_id]

        task.add_done_callback(forget)

    @staticmethod
    async def _logged(session_id: int, work: Coroutine[Any, Any, None]) -> None:
        try:
            await work
        except Exception:  # a background task: log, never raise into the loop
            log.exception("preparing the summary of session %s failed", session_id)

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

    # ------------------------------------------------------------ the call

    async def fold_or_fail(
        self,
        session: SessionInfo,
        *,
        records: Sequence[StoredRecord],
        cut: int,
        previous: SummaryRecord | None,
        messages: Sequence[ChatMessage],
        turn_id: str,
        why: FoldReason,
        bound: int | None = None,
        within: int | None = None,
        narrow: Sequence[ChatMessage] | None = None,
        offline: bool = False,
    ) -> FoldResult:
        """Fold `records[:cut]` (and `previous`) into a new summary stored under
        `records[cut - 1]`, and say whether a due fold failed (a provider error, the capacity
        check, an empty answer): then nothing may leave the window for good. No summary and
        no failure when there was nothing to fold (no alias departs, or the scene keeps no
        summary).

        `why`: `move`, a window move waits for it (no summary was prepared); `prepare`,
        after a reply for the next move (a failure only means that move folds in its turn);
        `trim`, a runtime trim drops turns; `overflow`, the provider refused the turn's
        request as too long: `messages` then hold only what leaves, and the summary request
        must stay smaller than `within` real tokens (what was refused, or the limit the
        provider reported), else no call is made and the move waits.

        `narrow`: the head and only what leaves; the request is made of it when the reply
        request's shape (`messages`) does not fit the window by the one capacity check, so a
        window near its limit still folds (its cache is cold, but nothing is refused).

        `bound`: the summary's bound in tokens, computed by the caller from the window's
        clamped budget (`RequestBuilder.window_limits`); else the scene's configured one.

        `offline`: no model call; the summary is folded extractively (one line per message,
        as the offline model does), for what leaves but fits no request at all."""
        if why == "move":
            self.sync_folds += 1
        elif why == "prepare":
            self.prepared_folds += 1
        budget = bound if bound is not None else self.policy.summary_budgets.of(session.scene)
        departing = records[:cut]
        plan = plan_fold(departing, previous, budget) if budget > 0 and cut > 0 else None
        if plan is None:
            return FoldResult(None)
        route = self.routes.resolve(self.policy.route or session.route)
        specs = tuple(tool.spec for tool in self.scopes.offered(self.tools, session).values())
        correction = self.correction(route.profile, route.model)
        messages = summary_request(messages, first=plan.first, last=plan.last, max_tokens=budget)
        if offline:
            shown = summary_request(
                narrow or messages, first=plan.first, last=plan.last, max_tokens=budget
            )
            return await self._stored(
                session, extractive_summary(shown), plan, records, cut, previous
            )
        needs = request_needs(messages, specs, route, correction)
        if narrow is not None and not self.caller.fits(needs, route, within=within):
            # the whole window does not fit: only what leaves
            messages = summary_request(narrow, first=plan.first, last=plan.last, max_tokens=budget)
            needs = request_needs(messages, specs, route, correction)
        system = sum(estimate_message_tokens(m) for m in messages if m.role == "system")
        schemas = estimate_tool_schema_tokens([s.schema() for s in specs])
        report = CallReport(
            session=session,
            turn_id=turn_id,
            tokens=split_request_tokens(messages, len(messages) - 1),
            fixed_tokens=system + schemas,
            purpose="compaction",
            history_budget=budget,
        )
        try:
            # the instruction is the one message nobody repeats: the window before it is
            # read from (and written for) the chat's reply requests
            response = await self.caller.send(
                route,
                tuple(messages),
                tools=specs,
                needs=needs,
                report=report,
                current=len(messages) - 1,
                tool_choice="none" if specs else None,
                max_output_tokens=budget * 2,
                within=within,
            )
        except (BotError, OSError) as exc:
            log.warning("summary call for session %s failed: %s", session.id, exc)
            # refused before sending: even only what leaves is too large for one request
            return FoldResult(None, failed=True, too_large=isinstance(exc, CapacityExceeded))
        # a refused summary is no summary, whatever text came before the refusal
        text = "" if response.stop == "refusal" else response.text
        return await self._stored(session, text, plan, records, cut, previous)

    async def _stored(
        self,
        session: SessionInfo,
        text: str,
        plan: FoldPlan,
        records: Sequence[StoredRecord],
        cut: int,
        previous: SummaryRecord | None,
    ) -> FoldResult:
        """The summary `text` answers, stored under `records[cut - 1]`; failed when empty."""
        departing = records[:cut]
        summary = new_summary(text, plan=plan, departing=departing, previous=previous)
        if summary is None:
            log.warning("summary call for session %s answered nothing", session.id)
            return FoldResult(None, failed=True)
        tokens = estimate_message_tokens(ChatMessage(role="user", content=summary.text))
        await self.store.append(
            session.id,
            [NewRecord(body=summary, created_at=self.clock.now(), tokens=tokens)],
            parent_id=records[cut - 1].id,
            move_leaf=False,
        )
        return FoldResult(summary)

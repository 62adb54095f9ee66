"""A turn's window: load → plan → fold → keep → persist.

`Windows` opens one `ConversationWindow` per turn (`open`): it loads the records from the
stored start and projects them with the turn's per-turn blocks on the current message only;
plans the window (`bot.context.window_plan.plan_window`: the start moves in chunks, onto a
prepared summary when one serves); folds what departs when the plan says so; stores a moved
start and projects the kept records again. What leaves a window, and the window shrinking
during a turn (`drop_oldest` after a proactive trim or an overflow, `forget` after a tool
deleted messages), live in `bot.agent.window_fold` (`Windows.folds`).

Every fold goes through `WindowFolds.fold` and every projection through `Windows.project`:
whatever asks, the summary call sees the window as the chat's reply requests show it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence

from bot.agent.compactor import Compactor, newest_summary
from bot.agent.request import MAX_REACTION_LINES, RequestBuilder
from bot.agent.routes import RouteTable
from bot.agent.window_fold import WindowFolds
from bot.agent.window_state import ConversationWindow, LoadedWindow, WindowPolicy
from bot.context.alias_table import AliasTable
from bot.context.history_trimmed import HistoryTrimmed
from bot.context.prepared_summary import PreparedSummary
from bot.context.projection import (
    Projection,
    RenderedPrefix,
    current_record_index,
    project,
    without_per_turn_cost,
)
from bot.context.task_block import TaskInstruction
from bot.context.tokens import NO_CORRECTION, TokenCorrection
from bot.context.window import (
    RuntimeLimits,
    WindowLimits,
    select_window,
    summary_bound,
    turn_costs,
)
from bot.context.window_plan import WindowPlan, plan_window, predict_cut
from bot.domain.records import StoredRecord, SummaryRecord, UserRecord
from bot.ports import LoadedHistory, SessionInfo
from bot.store_ports import HistoryStore

RENDERED_SESSIONS = 512
"""Sessions whose last rendered window is kept to resume from (the busiest ones)."""
CURRENT_TURN_SHARE = 8
"""The current turn's allowance is 1/8 of the runtime budget (2,000 of 16,000): the window
leaves it for the per-turn blocks and the tool steps of the turn, so a turn of ordinary
size never needs the proactive trim."""


class Windows:
    """Opens a session's window for each turn, and prepares its next move's summary.

    `prompt` renders what the window is shown in (system prompt, per-turn blocks, tool
    schemas); `compactor` folds departing turns (None: compaction is off)."""

    def __init__(
        self,
        *,
        store: HistoryStore,
        routes: RouteTable,
        prompt: RequestBuilder,
        policy: WindowPolicy,
        runtime: RuntimeLimits,
        correction: Callable[[str, str], TokenCorrection] | None = None,
        compactor: Compactor | None = None,
    ) -> None:
        self.store = store
        self.routes = routes
        self.prompt = prompt
        self.policy = policy
        self.runtime = runtime
        """The runtime limits: the route's context budget, which the window leaves room in."""
        self.correction = correction or (lambda provider, model: NO_CORRECTION)
        """The learned token correction of a route (provider, model)."""
        self.compactor = compactor
        self.folds = WindowFolds(self)
        """What leaves a window: folds, and the shrinking during a turn."""
        self._prefixes: OrderedDict[int, RenderedPrefix] = OrderedDict()
        """Per session, what its last projection rendered before its current record: the
        next one renders only what follows (`bot.context.projection`, resume)."""

    async def open(
        self,
        session: SessionInfo,
        *,
        turn_id: str,
        told_user: Sequence[str] = (),
        persist: bool = True,
        task: TaskInstruction | None = None,
    ) -> ConversationWindow:
        """The turn's window: loaded, planned (keep the start, move it onto a prepared
        summary, or move it and fold what departs), folded if the plan says so, and
        projected as kept. `task`: a scheduled task's turn, its instruction among the
        per-turn blocks, which ride after the history (`ConversationWindow.detached`).

        `persist=False` previews without storing a moved start, without fetching images and
        without calling the summary model (`tgbot context show` is read-only). The turn works
        with the session as loaded with its history (route, scene and window as stored now),
        not as the caller last saw it."""
        read_at = self.prompt.clock.now()
        turn = await self.store.load_turn(
            session.id, max_records=self.policy.max_records, reactions_limit=MAX_REACTION_LINES
        )
        session = self.prompt.scopes.scoped(turn.history.session)  # the chat's route, unless /model
        route = self.routes.resolve_for(session.id, session.route)
        blocks = await self.prompt.blocks(
            session,
            route,
            turn.history.records,
            told_user,
            fetch=persist,
            reactions=turn.reactions,
            read_at=read_at,
            task=task,
        )
        detached = task is not None
        # the summary of what precedes the window
        previous = newest_summary(turn.summaries) if turn.history.has_earlier else None
        start = await self.load(turn.history, blocks.text, previous, detached=detached)
        correction, records, projection = start.correction, start.records, start.projection
        costs = start.costs
        plan = await self._plan(start, persist=persist)
        window = ConversationWindow(
            session=session,
            route=route,
            turn_id=turn_id,
            correction=correction,
            limits=start.limits,
            records=records,
            projection=projection,
            blocks=blocks.text,
            aliases=AliasTable(),
            summary=None,
            images=blocks.images,
            crumb=plan.crumb,
            budget=self.runtime.effective_context_budget(route.context_window),
            history_budget=self.policy.history_budgets.of(session.scene),
            dropped_turns=plan.decision.dropped_turns,
            detached=detached,
        )
        begin = start.starts[plan.decision.start] if plan.decision.moved else 0
        if plan.fold:  # the member's turn waits for the summary of what the move drops
            fold = await self.folds.fold(
                session, records, begin, previous, start.limits, turn_id, "move"
            )
            # a failed fold: the move waits (as far as the fold went), so the summary shown
            # always ends right before the window
            plan = plan.after_fold(fold.summary, failed=fold.through == 0)
            begin = fold.through
            window.crumb = plan.crumb if begin > 0 else start.earlier
        window.summary = plan.summary
        for alias, message_id in blocks.reacted:  # the reactions block names them
            window.aliases.register(alias, message_id)
        kept = costs
        if begin > 0:
            window.records = records[begin:]
            if plan.persist:
                await self.store.set_window_start(session.id, window.records[0].id)
            window.projection = await self.project(
                session, window.records, blocks.text, detached=detached
            )
            kept = turn_costs(without_per_turn_cost(window.projection, blocks.text))
            window.trims.append(
                HistoryTrimmed.from_window(
                    plan.decision, start.limits, session=session.id, turn_id=turn_id
                )
            )
        register_shown(window.aliases, window.projection, window.summary)
        if self.compactor is not None:  # is the next move near? then prepare after the reply
            margin = self.compactor.policy.prepare_margin
            window.fold_soon = predict_cut(kept, start.limits, margin) is not None
        return window

    async def _plan(self, loaded: LoadedWindow, *, persist: bool) -> WindowPlan:
        """Where the window starts for this turn and what happens to its summary; the
        summaries prepared inside the window are looked up only when it moves."""
        costs, limits = loaded.costs, loaded.limits
        answered = None if self.policy.count_unanswered_turns else costs.answered
        decision = select_window(costs.tokens, costs.messages, 0, limits, answered=answered)
        prepared: tuple[PreparedSummary, ...] = ()
        if decision.moved and self.compactor is not None:
            await self.compactor.settle(loaded.session.id)  # one in preparation may serve
            records = loaded.records[: loaded.starts[-1]]
            prepared = await self.compactor.find_prepared(loaded.session, records, loaded.starts)
        return plan_window(
            decision,
            costs,
            limits,
            earlier=loaded.earlier,
            previous=loaded.previous,
            prepared=prepared,
            compaction=self.compactor is not None,
            fold_now=persist,
            persist=persist,
        )

    async def render(self, window: ConversationWindow, records: tuple[StoredRecord, ...]) -> None:
        """Keep `records` in `window`, projected again; every alias the new rendering shows
        is valid."""
        window.records = records
        window.projection = await self.project(
            window.session, records, window.blocks, detached=window.detached
        )
        register_shown(window.aliases, window.projection, window.summary)

    async def load(
        self,
        history: LoadedHistory,
        blocks: str,
        previous: SummaryRecord | None,
        *,
        detached: bool = False,
    ) -> LoadedWindow:
        """The window as loaded, before its plan (what `open` and `_prepare_next` share):
        its route, limits, projection with `blocks` and each turn's cost without them."""
        session = self.prompt.scopes.scoped(history.session)  # the chat's route, unless /model
        records = history.records
        route = self.routes.resolve_for(session.id, session.route)
        correction = self.correction(route.profile, route.model)
        projection = await self.project(session, records, blocks, detached=detached)
        costs = turn_costs(without_per_turn_cost(projection, blocks))
        return LoadedWindow(
            session=session,
            route=route,
            correction=correction,
            limits=self.limits(session, correction),
            records=records,
            earlier=history.has_earlier,
            previous=previous,
            blocks=blocks,
            projection=projection,
            costs=costs,
            starts=tuple(projection.record_index[i] for i in costs.starts),
        )

    def limits(self, session: SessionInfo, correction: TokenCorrection) -> WindowLimits:
        """The scene's window limits; the summary's bound is reserved inside its budget.
        Budgets are real tokens; the window counts our estimate (`correction`).

        The budget is also clamped to what the runtime budget of the session's route leaves
        (`history_room`), so the chunked, persisted window is what binds and the proactive
        trim is only the safety net for one oversized turn."""
        scene = session.scene
        history_budget = self.policy.history_budgets.of(scene)
        room = self.history_room(session, correction)
        if room is not None:
            history_budget = min(history_budget, room) if history_budget > 0 else room
        reserve = 0
        if self.compactor is not None:  # a quarter of the clamped budget at most
            configured = self.compactor.policy.summary_budgets.of(scene)
            reserve = summary_bound(configured, history_budget)
        caps = self.policy.caps.of(scene)
        budget = max(1, history_budget - reserve) if history_budget > 0 else 0
        return WindowLimits(
            token_budget=correction.to_estimate(budget) if budget > 0 else 0,
            max_turns=caps.max_turns,
            max_messages=caps.max_messages,
            headroom=self.policy.headroom,
            summary_bound=reserve,
        )

    def history_room(self, session: SessionInfo, correction: TokenCorrection) -> int | None:
        """Real tokens the runtime budget leaves the history (summary included): the budget
        less the fixed parts (system prompt, breadcrumb, tool schemas) and the current
        turn's allowance (`CURRENT_TURN_SHARE` of the budget). None when proactive
        trimming is off."""
        route = self.routes.resolve_for(session.id, session.route)
        runtime = self.runtime.effective_context_budget(route.context_window)
        if runtime <= 0:
            return None
        fixed = self.prompt.fixed_tokens(session, crumb=True)
        allowance = runtime // CURRENT_TURN_SHARE
        return max(1, runtime - correction.apply(fixed) - allowance)

    async def project(
        self,
        session: SessionInfo,
        records: Sequence[StoredRecord],
        blocks: str,
        *,
        detached: bool = False,
    ) -> Projection:
        """`records` rendered as the model reads them, `blocks` on the current message
        (`detached`: on none, every record is history); a quote of a message outside them is
        named by its alias, the same way on every call."""
        prompt = self.prompt.policy
        projection = project(
            records,
            current_index=None if detached else current_record_index(records),
            scene=session.scene,
            zone=prompt.zone,
            locale=prompt.locale_of(session.key.chat_id),
            bot_user_id=self.prompt.bot_id,
            per_turn_blocks=blocks,
            quote_targets=await self._quote_targets(session, records),
            chat_id=session.key.chat_id,
            owner_id=prompt.owner_id,
            resume=self._prefixes.get(session.id),
        )
        if projection.prefix is not None:
            self._prefixes[session.id] = projection.prefix
            self._prefixes.move_to_end(session.id)
            while len(self._prefixes) > RENDERED_SESSIONS:
                self._prefixes.popitem(last=False)
        return projection

    async def _quote_targets(
        self, session: SessionInfo, records: Sequence[StoredRecord]
    ) -> Mapping[int, str]:
        """Aliases of quoted messages that are not in `records` (the window)."""
        shown = {mid for record in records for mid in record.message_ids if mid is not None}
        quoted = set()
        for record in records:
            quote = record.body.quote if isinstance(record.body, UserRecord) else None
            if quote is not None and quote.id and quote.chat_id in (None, session.key.chat_id):
                quoted.add(quote.id)
        missing = quoted - shown
        return await self.store.find_aliases(session.id, missing) if missing else {}


def register_shown(
    aliases: AliasTable, projection: Projection, summary: SummaryRecord | None
) -> None:
    """Every alias the projection and the summary showed, and the quotes the projection
    showed by platform id."""
    for alias, message_id in projection.aliases:
        aliases.register(alias, message_id)
    # Only quotes the projection showed by platform id: never a quote from another
    # chat (its id means nothing here), never one the model was not shown.
    for message_id in projection.references:
        aliases.register_reference(message_id)
    if summary is not None:  # the aliases the summary mentions are valid references
        for alias, message_id in summary.aliases:
            aliases.register(alias, message_id)

"""A turn's window: load → plan → fold → keep → persist, and the shrinking after it.

`Windows` opens one `ConversationWindow` per turn (`open`): it loads the records from the
stored start and projects them with the turn's per-turn blocks on the current message only;
plans the window (`bot.context.window_plan.plan_window`: the start moves in chunks, onto a
prepared summary when one serves); folds what departs when the plan says so; stores a moved
start and projects the kept records again. During the turn the window shrinks only through
`ConversationWindow.drop_oldest` (a proactive trim, or after an overflow: whole turns leave
the records and the rest is rendered again, never cut out of the rendered list) and changes
through `forget` (a tool deleted messages). After a reply whose next move is near,
`Windows.prepare_next` folds that move's summary in the background.

Every fold goes through `Windows.fold` and every projection through `Windows.project`:
whatever asks, the summary call sees the window as the chat's reply requests show it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

from bot.agent.compactor import Compactor, FoldReason, newest_summary, summary_before
from bot.agent.request import MAX_REACTION_LINES, RequestBuilder
from bot.agent.routes import ModelRoute, RouteTable
from bot.context.alias_table import AliasTable
from bot.context.history_trim import HistoryTrimmed
from bot.context.memory_block import without_facts
from bot.context.projection import (
    Projection,
    RenderedPrefix,
    current_record_index,
    project,
    without_per_turn_cost,
)
from bot.context.task_block import TaskInstruction
from bot.context.tokens import NO_CORRECTION, TokenCorrection
from bot.context.turns import turn_starts
from bot.context.window import (
    PerScene,
    RuntimeLimits,
    TurnCosts,
    WindowLimits,
    select_window,
    summary_bound,
    turn_costs,
)
from bot.context.window_plan import (
    PreparedSummary,
    WindowPlan,
    plan_window,
    predict_cut,
    usable_summary,
)
from bot.domain.erasure import (
    deleted_trace,
    erased_body,
    without_content_of,
    without_deleted_lines,
    without_quoted_text,
)
from bot.domain.messages import ChatMessage, ImagePart
from bot.domain.records import StoredRecord, SummaryRecord, UserRecord
from bot.ports import LoadedHistory, SessionInfo
from bot.store_ports import HistoryStore

RENDERED_SESSIONS = 512
"""Sessions whose last rendered window is kept to resume from (the busiest ones)."""
CURRENT_TURN_SHARE = 8
"""The current turn's allowance is 1/8 of the runtime budget (2,000 of 16,000): the window
leaves it for the per-turn blocks and the tool steps of the turn, so a turn of ordinary
size never needs the proactive trim."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SceneCaps:
    """The turn and message caps of one scene's window."""

    max_turns: int
    max_messages: int


@dataclass(frozen=True, slots=True, kw_only=True)
class WindowPolicy:
    """What each scene's window is held to (`history.*`).

    `history_budgets` are real tokens (the window converts them into our estimate through
    the route's token correction); `caps` the turn and message caps per scene, overrides
    applied; `count_unanswered_turns`: every turn counts against the turn cap, answered or
    not (`history.turn_cap_counts = "all"`)."""

    history_budgets: PerScene[int]
    caps: PerScene[SceneCaps]
    headroom: float = 0.25
    count_unanswered_turns: bool = False

    @property
    def max_records(self) -> int:
        """How many records to load: the largest message cap plus room for tool rows."""
        caps = (self.caps.group, self.caps.private, self.caps.owner)
        return max(c.max_messages for c in caps) * 2 + 20


@dataclass(slots=True, kw_only=True)
class ConversationWindow:
    """One turn's window over a session's history, as the turn's requests show it.

    `records` are the kept records, oldest first; `projection` their rendering (before the
    orphan repair); `blocks` the per-turn blocks the current message carries, rendered once
    per turn so a re-render keeps them byte for byte; `aliases` the turn's alias table,
    which a re-render adds to (an alias shown once stays valid for the turn); `summary` the
    compaction summary shown after the breadcrumb; `images` the turn's images, on the
    current message for this turn's calls only (never stored). `detached`: no member's
    message is current (a scheduled task's turn): every record renders as history and the
    blocks ride on a message of their own after it (`TurnState.lay_out`). `crumb`: earlier
    history is left out (the breadcrumb is shown). `budget` is the route's runtime budget and
    `history_budget` the scene's, in real tokens; `correction` converts them into our
    estimate. `trims` are the window's moves and cuts not yet reported with a model call.
    """

    session: SessionInfo
    route: ModelRoute
    turn_id: str
    correction: TokenCorrection
    limits: WindowLimits
    records: tuple[StoredRecord, ...]
    projection: Projection
    blocks: str
    aliases: AliasTable
    summary: SummaryRecord | None
    images: tuple[ImagePart, ...]
    crumb: bool
    budget: int
    history_budget: int
    dropped_turns: int = 0
    fold_soon: bool = False
    """The next window move is near: prepare the summary after the reply."""
    trims: list[HistoryTrimmed] = field(default_factory=list)
    detached: bool = False


@dataclass(frozen=True, slots=True)
class Folded:
    """What a fold did: the new summary (None: none new), and `through`, the record index up
    to which what leaves may leave for good (the summary, if any, ends right before it)."""

    summary: SummaryRecord | None
    through: int


@dataclass(frozen=True, slots=True, kw_only=True)
class _Loaded:
    """A session's window as loaded for a turn, before its plan: the records from the stored
    start (`earlier`: records precede them; `previous`: the summary of those), their
    projection with this turn's per-turn blocks, each turn's cost and first record
    (`starts[i]`), and the limits the window is held to."""

    session: SessionInfo
    route: ModelRoute
    correction: TokenCorrection
    limits: WindowLimits
    records: tuple[StoredRecord, ...]
    earlier: bool
    previous: SummaryRecord | None
    blocks: str
    projection: Projection
    costs: TurnCosts
    starts: tuple[int, ...]


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
        start = await self._load(turn.history, blocks.text, previous, detached=detached)
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
            fold = await self.fold(session, records, begin, previous, start.limits, turn_id, "move")
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

    async def _plan(self, loaded: _Loaded, *, persist: bool) -> WindowPlan:
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

    async def fold(
        self,
        session: SessionInfo,
        records: Sequence[StoredRecord],
        cut: int,
        previous: SummaryRecord | None,
        limits: WindowLimits,
        turn_id: str,
        why: FoldReason,
        within: int | None = None,
    ) -> Folded:
        """Fold `records[:cut]` (and `previous`) into a new summary: the summary (None:
        none new) and how far what leaves may leave for good (`through`, a record index:
        `cut` when all of it, 0 when the fold failed). With compaction off, or nothing to
        fold, what leaves just leaves.

        The summary call repeats the window as the reply requests show it (its prefix is
        cached), or, when that does not fit, shows only what leaves (`narrow`); after an
        overflow (`within`) only what leaves, under what was refused. When even only what
        leaves does not fit one request, it is folded in pieces of whole turns, oldest
        first, each on top of the summary before it: a chat whose history outgrew a small
        window still moves its start, and a start once moved stays. A piece that fails for
        another reason stops there (`through` says how far the pieces went)."""
        compactor = self.compactor
        if compactor is None:
            return Folded(None, cut)
        if within is not None:  # the window is smaller than we knew: so is the summary
            limits = replace(limits, summary_bound=min(limits.summary_bound, within // 4))
        narrow = await self.fold_messages(session, records[:cut], previous)
        whole = narrow
        if within is None:
            whole = await self.fold_messages(session, records, previous)
        result = await compactor.fold_or_fail(
            session,
            records=records,
            cut=cut,
            previous=previous,
            messages=whole,
            turn_id=turn_id,
            why=why,
            bound=limits.summary_bound,
            within=within,
            narrow=narrow,
        )
        if not result.too_large:
            return Folded(result.summary, 0 if result.failed else cut)
        return await self._fold_in_pieces(
            session, records, cut, previous, limits, turn_id, why, within
        )

    async def _fold_in_pieces(
        self,
        session: SessionInfo,
        records: Sequence[StoredRecord],
        cut: int,
        previous: SummaryRecord | None,
        limits: WindowLimits,
        turn_id: str,
        why: FoldReason,
        within: int | None,
    ) -> Folded:
        """Fold `records[:cut]` piece by piece (see `fold`): each piece as many whole turns
        as one request holds, halved until it fits; a single turn too large for any request
        is folded extractively (no model call: one line per message), so it leaves too."""
        compactor = self.compactor
        assert compactor is not None
        projection = await self.project(session, records[:cut], "")
        ends = sorted(
            {projection.record_index[i] for i in turn_starts(projection.messages)} - {0} | {cut}
        )
        summary, through = previous, 0
        folded: SummaryRecord | None = None
        while through < cut:
            candidates = [end for end in ends if end > through]
            end = candidates[-1]
            while True:
                piece = records[through:]
                narrow = await self.fold_messages(session, piece[: end - through], summary)
                fold_piece = partial(
                    compactor.fold_or_fail,
                    session,
                    records=piece,
                    cut=end - through,
                    previous=summary,
                    messages=narrow,
                    turn_id=turn_id,
                    why=why,
                    bound=limits.summary_bound,
                )
                result = await fold_piece(within=within, narrow=narrow)
                smaller = [c for c in candidates if c < end]
                if not result.too_large:
                    break
                if not smaller:  # one turn fits no request: folded without the model
                    result = await fold_piece(offline=True)
                    break
                end = smaller[(len(smaller) - 1) // 2]
            if result.failed:
                break
            if result.summary is not None:
                summary = folded = result.summary
            through = end
        return Folded(folded, through)

    async def drop_oldest(
        self, window: ConversationWindow, count: int, *, within: int | None = None
    ) -> int:
        """Drop the `count` oldest whole turns from `window`'s records and render the rest again
        (docs/architecture.md, Rendering a message): the first kept message opens the window
        (date, full sender name) and a quote of a dropped message degrades to its inline
        line. The newest turn is never dropped. Returns the turns dropped (0: none could be).

        What leaves is folded into the summary like a move's. `within`: the provider just
        refused the turn's request as too long (its size, or the limit it reported): the
        fold summarises only what leaves, in a request smaller than that, or the cut waits
        (breadcrumb only, the summary stays as it was)."""
        projection = window.projection
        starts = turn_starts(projection.messages)
        current = projection.current_message_index
        if current is not None:  # the current message's turn always stays
            starts = [s for s in starts if s <= current]
        count = min(count, len(starts) - 1)
        if count <= 0:
            return 0
        cut = projection.record_index[starts[count]]
        session = window.session
        why: FoldReason = "trim" if within is None else "overflow"
        fold = await self.fold(
            session, window.records, cut, window.summary, window.limits, window.turn_id, why, within
        )
        records = window.records[cut:]
        if fold.through > 0:  # a cut is persisted like a move: the next call never undoes it
            await self.store.set_window_start(session.id, window.records[fold.through].id)
        # the summary shown ends right before the window, or none is shown (the breadcrumb
        # alone): the model never reads a summary, then a gap, then the window
        window.summary = (fold.summary or window.summary) if fold.through == cut else None
        window.crumb = True
        await self._render(window, records)
        window.dropped_turns += count
        return count

    async def forget_facts(self, window: ConversationWindow, fact_ids: frozenset[int]) -> bool:
        """Render `window` again without the `[Memory]` lines of `fact_ids` (a tool made the
        model forget them during the turn): the turn's next calls no longer show them.
        False when none was shown."""
        blocks = without_facts(window.blocks, fact_ids)
        if blocks == window.blocks:
            return False
        window.blocks = blocks
        await self._render(window, window.records)
        return True

    async def forget(self, window: ConversationWindow, message_ids: frozenset[int]) -> bool:
        """Render `window` again with `message_ids` deleted (a tool deleted them during
        the turn): the turn's next calls show `[deleted]` where they were, as every later
        turn does (storage has already forgotten them). False when none was shown."""
        traces = [
            trace
            for record in window.records
            if isinstance(record.body, UserRecord) and message_ids & set(record.message_ids)
            if (trace := deleted_trace(record.body.text)) is not None
        ]

        def erased(record: StoredRecord) -> StoredRecord:
            body = record.body
            for message_id in message_ids:
                if message_id in record.message_ids:
                    body = erased_body(replace(record, body=body), message_id, None)
                else:
                    body = without_quoted_text(body, message_id)
                    body = without_content_of(body, message_id)
            for trace in traces:  # a search hit that showed it
                body = without_deleted_lines(body, trace)
            return record if body is record.body else replace(record, body=body)

        records = tuple(map(erased, window.records))
        if all(new is old for new, old in zip(records, window.records, strict=True)):
            return False
        await self._render(window, records)
        return True

    async def _render(self, window: ConversationWindow, records: tuple[StoredRecord, ...]) -> None:
        """Keep `records` in `window`, projected again; every alias the new rendering shows
        is valid."""
        window.records = records
        window.projection = await self.project(
            window.session, records, window.blocks, detached=window.detached
        )
        register_shown(window.aliases, window.projection, window.summary)

    def prepare_next(self, session: SessionInfo, *, turn_id: str) -> None:
        """The turn answered and its next window move is near: prepare that move's summary
        in the background (one at a time per session), so the move waits for no model."""
        compactor = self.compactor
        if compactor is None or compactor.preparing(session.id):
            return
        compactor.in_background(session.id, self._prepare_next(session, turn_id))

    async def _prepare_next(self, session: SessionInfo, turn_id: str) -> None:
        """Load the window as it stands after the reply, plan where its next move will
        start (`predict_cut`), and fold what that move drops, unless a summary prepared
        earlier already serves it (`usable_summary`)."""
        compactor = self.compactor
        if compactor is None:
            return
        history = await self.store.load_history(session.id, max_records=self.policy.max_records)
        start = await self._load(history, "", None)
        session, records, limits = start.session, start.records, start.limits
        turn = predict_cut(start.costs, limits, compactor.policy.prepare_margin)
        if turn is None:
            return
        prepared = await compactor.find_prepared(session, records, start.starts)
        if usable_summary(turn, prepared, start.costs, limits) is not None:
            return  # one prepared already serves the next move
        # read only when a fold follows (not for a move a prepared summary already serves)
        summary = await summary_before(self.store, session, records) if start.earlier else None
        await self.fold(session, records, start.starts[turn], summary, limits, turn_id, "prepare")

    async def _load(
        self,
        history: LoadedHistory,
        blocks: str,
        previous: SummaryRecord | None,
        *,
        detached: bool = False,
    ) -> _Loaded:
        """The window as loaded, before its plan (what `open` and `_prepare_next` share):
        its route, limits, projection with `blocks` and each turn's cost without them."""
        session = self.prompt.scopes.scoped(history.session)  # the chat's route, unless /model
        records = history.records
        route = self.routes.resolve_for(session.id, session.route)
        correction = self.correction(route.profile, route.model)
        projection = await self.project(session, records, blocks, detached=detached)
        costs = turn_costs(without_per_turn_cost(projection, blocks))
        return _Loaded(
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

    async def fold_messages(
        self,
        session: SessionInfo,
        records: Sequence[StoredRecord],
        summary: SummaryRecord | None,
    ) -> list[ChatMessage]:
        """The window as the chat's reply requests show it, without this turn's per-turn
        blocks: what a summary request repeats before its instruction."""
        projection = await self.project(session, records, "")
        has_earlier = bool(records) and records[0].parent_id is not None
        head = self.prompt.head(session, has_earlier=has_earlier, summary=summary)
        return head + list(projection.messages)

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

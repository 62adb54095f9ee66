"""Preparing a turn's request: window, projection, quote targets, per-turn blocks, prompt.

Everything up to the first provider call, in one line: load the window's records and
project them with the per-turn blocks on the current message only; plan the window
(`bot.context.compaction.plan_window`: the start moves in chunks, onto a prepared summary
when one serves); fold what departs when the plan says so (`Compactor`); store a moved
start and project the kept records again; put the system prompt (and the breadcrumb and
summary when earlier history is left out) in front. Tool steps left without their partner
(an imported or edited history) never reach the provider (`remove_orphaned_tool_messages`).

A runtime trim (proactive, or after an overflow) goes through `drop_turns`: whole turns
leave the records and the rest is rendered again, never cut out of the rendered list.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from bot.agent.compactor import Compactor, summary_before
from bot.agent.policy import PromptPolicy, WindowPolicy
from bot.agent.prompt import PromptFacts, TurnContext, build_per_turn_blocks, build_system_prompt
from bot.agent.reactions_block import ReactionsBlock
from bot.agent.routes import ModelRoute, RouteTable
from bot.agent.turn import TurnState, TurnWindow
from bot.agent.turn_images import NO_IMAGES, TurnImages
from bot.context.alias_table import AliasTable
from bot.context.budget import RuntimeLimits, summary_bound
from bot.context.compaction import (
    PreparedSummary,
    WindowPlan,
    plan_window,
    predict_cut,
    summary_message,
    usable_summary,
)
from bot.context.history_trim import HistoryTrimmed, IndexedHistory, breadcrumb_message
from bot.context.projection import (
    PER_TURN_SEPARATOR,
    Projection,
    current_record_index,
    project,
    without_per_turn_cost,
)
from bot.context.tokens import (
    NO_CORRECTION,
    TokenCorrection,
    ensure_token_estimate,
    estimate_message_tokens,
    with_token_estimate,
)
from bot.context.turns import count_turns, remove_orphaned_tool_messages, turn_starts
from bot.context.window import (
    TurnCosts,
    WindowLimits,
    estimate_tool_schema_tokens,
    select_window,
    turn_costs,
)
from bot.domain.erasure import (
    deleted_trace,
    erased_body,
    without_deleted_lines,
    without_quoted_text,
)
from bot.domain.ids import Scene
from bot.domain.messages import ChatMessage, ImagePart
from bot.domain.records import StoredRecord, SummaryRecord, UserRecord
from bot.ports import Clock, SessionInfo
from bot.store_ports import RecentReactions, WindowStore
from bot.tools.base import Tool, offered_in

CURRENT_TURN_SHARE = 8
"""The current turn's allowance is 1/8 of the runtime budget (2,000 of 16,000): the window
leaves it for the per-turn blocks and the tool steps of the turn, so a turn of ordinary
size never needs the proactive trim."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadedWindow:
    """A session's window as loaded for a call, before its plan: the records from the stored
    start (`earlier`: records precede them; `previous`: the summary of those), their
    projection with this turn's per-turn blocks, each turn's cost and first record
    (`starts[i]`), the limits the window is held to, and the reactions the blocks name."""

    session: SessionInfo
    route: ModelRoute
    correction: TokenCorrection
    limits: WindowLimits
    records: tuple[StoredRecord, ...]
    earlier: bool
    previous: SummaryRecord | None
    blocks: str
    reacted: tuple[tuple[str, int], ...]
    projection: Projection
    costs: TurnCosts
    starts: tuple[int, ...]
    images: tuple[ImagePart, ...] = ()


class RequestBuilder:
    """Builds the first request of a turn from the stored history.

    `tools` is the runner's live tool table (name → tool): the prompt and the schema cost
    follow it when tools are added."""

    def __init__(
        self,
        *,
        store: WindowStore,
        routes: RouteTable,
        tools: Mapping[str, Tool],
        clock: Clock,
        window_policy: WindowPolicy,
        prompt: PromptPolicy,
        runtime: RuntimeLimits,
        bot_id: int | None,
        bot_name: str,
        correction: Callable[[str, str], TokenCorrection] | None = None,
        compactor: Compactor | None = None,
        reactions: RecentReactions | None = None,
        images: TurnImages | None = None,
    ) -> None:
        self.images = images
        """Finds and fetches the turn's images; None: images are never looked at."""
        self.compactor = compactor
        """Folds departing turns into the summary; None: compaction is off."""
        self.store = store
        self.correction = correction or (lambda provider, model: NO_CORRECTION)
        """The learned token correction of a route (provider, model)."""
        self.routes = routes
        self.tools = tools
        self.clock = clock
        self.window_policy = window_policy
        self.prompt = prompt
        self.runtime = runtime
        """The runtime limits: the route's context budget, which the window leaves room in."""
        self.bot_id = bot_id
        self.bot_name = bot_name
        self.reactions_block = ReactionsBlock(reactions, aliases=store, clock=clock)

    def reactions_answered(self, session_id: int) -> None:
        """The turn whose request was built last for `session_id` was answered: the reactions
        it showed are not shown again (one that arrived while it ran is)."""
        self.reactions_block.answered(session_id)

    def system_prompt(self, scene: Scene, chat_id: int | None = None) -> str:
        tools = offered_in(self.tools, scene)
        return build_system_prompt(
            PromptFacts(
                bot_name=self.bot_name,
                scene=scene,
                locale=self.prompt.locale_of(chat_id),
                tool_names=tuple(tools),
                workspace_rules=self.prompt.workspace_rules,
                tool_index=tuple(t.summary for t in tools.values() if t.summary),
                owner_id=self.prompt.owner_id,
            )
        )

    def schema_tokens(self, scene: Scene) -> int:
        """Our estimate of the tool schemas a request in `scene` sends."""
        offered = offered_in(self.tools, scene).values()
        return estimate_tool_schema_tokens([t.spec.schema() for t in offered])

    async def prepare(
        self,
        session: SessionInfo,
        *,
        turn_id: str,
        told_user: Sequence[str] = (),
        persist_window: bool = True,
    ) -> tuple[TurnState, AliasTable, list[StoredRecord]]:
        """The turn's state, its alias table and the window's records.

        Load the window, plan it (`plan_window`: keep the start, move it onto a prepared
        summary, or move it and fold what departs), fold if the plan says so, then
        project what the window keeps.

        `persist_window=False` previews without storing a moved window start and without
        calling the summary model (`tgbot context show` is read-only). The turn works with
        the session as loaded with its history (route, scene and window as stored now), not
        as the caller last saw it."""
        loaded = await self._load(session, told_user, fetch=persist_window)
        plan = await self._plan(loaded, persist=persist_window)
        if plan.fold:
            plan = await self._fold(loaded, plan, turn_id)
        records, projection, moved = await self._keep(loaded, plan, turn_id)
        state = self._start(loaded, plan, records, projection, turn_id)
        if moved is not None:
            state.pending_trims.append(moved)
        return state, state.window.aliases, list(records)

    async def _load(
        self, session: SessionInfo, told_user: Sequence[str], *, fetch: bool = True
    ) -> LoadedWindow:
        """The window from its stored start, projected with this turn's blocks (the
        `[Images]` block last, and with `fetch`, the images it names fetched)."""
        loaded = await self.store.load_history(
            session.id, max_records=self.window_policy.max_records
        )
        session = loaded.session
        route = self.routes.resolve(session.route)
        records = loaded.records
        correction = self.correction(route.profile, route.model)
        reactions, reacted = await self.reactions_block.read(session, records)
        prompt = self.prompt
        blocks = build_per_turn_blocks(
            TurnContext(
                now=self.clock.now(),
                zone=prompt.zone,
                zone_name=prompt.zone_name,
                model=route.model,
                scene=session.scene,
                locale=prompt.locale_of(session.key.chat_id),
                command_prefix=prompt.command_prefix,
                told_user=told_user,
                topic=session.title if session.key.thread_id else None,
                reactions=reactions,
            )
        )
        found = NO_IMAGES
        if fetch and self.images is not None:
            found = await self.images.collect(
                session, records, wire=route.wire, vision=route.vision
            )
            if found.block:
                blocks = f"{blocks}{PER_TURN_SEPARATOR}{found.block}" if blocks else found.block
        targets = await self._quote_targets(session, records)
        projection = self._project(records, session, blocks, targets)
        previous = None
        if loaded.has_earlier:  # the summary of what precedes the window
            previous = await summary_before(self.store, session, records)
        costs = turn_costs(without_per_turn_cost(projection, blocks))
        return LoadedWindow(
            session=session,
            route=route,
            correction=correction,
            limits=self.window_limits(session.scene, correction, session=session),
            records=records,
            earlier=loaded.has_earlier,
            previous=previous,
            blocks=blocks,
            reacted=reacted,
            projection=projection,
            costs=costs,
            starts=tuple(projection.record_index[i] for i in costs.starts),
            images=found.images,
        )

    async def _plan(self, loaded: LoadedWindow, *, persist: bool) -> WindowPlan:
        """Where the window starts for this call and what happens to its summary; the
        summaries prepared inside the window are looked up only when it moves."""
        costs, limits = loaded.costs, loaded.limits
        answered = None if self.window_policy.count_unanswered_turns else costs.answered
        decision = select_window(costs.tokens, costs.messages, 0, limits, answered=answered)
        prepared: tuple[PreparedSummary, ...] = ()
        if decision.moved and self.compactor is not None:
            await self.compactor.settle(loaded.session.id)  # one in preparation may serve
            starts = loaded.starts
            records = loaded.records[: starts[-1]]
            prepared = await self.compactor.find_prepared(loaded.session, records, starts)
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

    async def _fold(self, loaded: LoadedWindow, plan: WindowPlan, turn_id: str) -> WindowPlan:
        """Fold what the move drops into a new summary now (the member's turn waits)."""
        if self.compactor is None:
            return plan
        session, records = loaded.session, loaded.records
        cut = loaded.starts[plan.decision.start]
        folded, failed = await self.compactor.fold_or_fail(
            session,
            records=records,
            cut=cut,
            previous=loaded.previous,
            messages=await self.fold_messages(session, records, loaded.previous),
            turn_id=turn_id,
            why="move",
            bound=loaded.limits.summary_bound,
            narrow=await self.fold_messages(session, records[:cut], loaded.previous),
        )
        return plan.after_fold(folded, failed=failed)

    async def _keep(
        self, loaded: LoadedWindow, plan: WindowPlan, turn_id: str
    ) -> tuple[tuple[StoredRecord, ...], Projection, HistoryTrimmed | None]:
        """The records the window keeps and their projection; after a move, the new start
        stored (unless the plan says the move waits) and the move's `HistoryTrimmed`."""
        if not plan.decision.moved:
            return loaded.records, loaded.projection, None
        session = loaded.session
        records = loaded.records[loaded.starts[plan.decision.start] :]
        targets = await self._quote_targets(session, records)
        if plan.persist:  # a failed fold: the move waits, nothing leaves for good
            await self.store.set_window_start(session.id, records[0].id)
        moved = HistoryTrimmed.from_window(
            plan.decision, loaded.limits, session=session.id, turn_id=turn_id
        )
        return records, self._project(records, session, loaded.blocks, targets), moved

    def _start(
        self,
        loaded: LoadedWindow,
        plan: WindowPlan,
        records: tuple[StoredRecord, ...],
        projection: Projection,
        turn_id: str,
    ) -> TurnState:
        """The turn's state over the kept window: its alias table, the request laid out,
        and whether the next move is near enough to prepare its summary after the reply."""
        session, route = loaded.session, loaded.route
        chat_id = session.key.chat_id
        summary = plan.summary
        aliases = AliasTable()
        window = TurnWindow(
            records=records,
            projection=projection,
            blocks=loaded.blocks,
            aliases=aliases,
            summary=summary,
            images=loaded.images,
        )
        register_shown(aliases, projection, chat_id)
        for alias, message_id in loaded.reacted:  # the reactions block names them
            aliases.register(alias, chat_id, message_id)
        if summary is not None:  # the aliases the summary mentions are valid references
            for alias, message_id in summary.aliases:
                aliases.register(alias, chat_id, message_id)
        state = TurnState(
            session=session,
            route=route,
            turn_id=turn_id,
            messages=IndexedHistory(),
            crumb=plan.crumb,
            current_index=0,
            fixed_tokens=0,
            budget=self.runtime.effective_context_budget(route.context_window),
            history_budget=self.window_policy.history_budgets.of(session.scene),
            kept_turns=0,
            dropped_turns=plan.decision.dropped_turns,
            window=window,
            history_start=0,
            history_end=0,
            correction=loaded.correction,
        )
        self._lay_out(state, window, tail=[])
        state.fixed_tokens = estimate_message_tokens(state.messages[0]) + self.schema_tokens(
            session.scene
        )
        if self.compactor is not None:  # is the next move near? then prepare after the reply
            kept = (
                loaded.costs
                if not plan.decision.moved
                else turn_costs(without_per_turn_cost(projection, loaded.blocks))
            )
            margin = self.compactor.policy.prepare_margin
            state.fold_soon = predict_cut(kept, loaded.limits, margin) is not None
        return state

    async def drop_turns(
        self, state: TurnState, count: int, *, within: int | None = None
    ) -> tuple[int, int]:
        """Drop the `count` oldest whole turns of the window from its records, then render
        the rest again (docs/architecture.md, Rendering a message): the first kept message
        opens the window (date, full sender name) and a quote of a dropped message degrades
        to its inline line.

        This turn's tool steps after the window stay as they are; the newest turn is never
        dropped. Returns (turns, messages) dropped from the rendered window: (0, 0) when
        nothing could be dropped.

        `within`: the provider just refused the turn's request as too long (its size, or
        the limit it reported): the fold summarises only what leaves, in a request smaller
        than that, or the cut waits (breadcrumb only, the summary stays as it was)."""
        window = state.window
        projection = window.projection
        starts = turn_starts(projection.messages)
        current = projection.current_message_index
        if current is not None:  # the current message's turn always stays
            starts = [s for s in starts if s <= current]
        count = min(count, len(starts) - 1)
        if count <= 0:
            return 0, 0
        cut = projection.record_index[starts[count]]
        session = state.session
        summary, persist = window.summary, True
        if self.compactor is not None:  # what the trim drops is folded like a move's
            # after an overflow the request that repeats the whole window cannot be sent:
            # only what leaves is shown to the summary call
            narrow = await self.fold_messages(session, window.records[:cut], window.summary)
            whole = narrow
            if within is None:
                whole = await self.fold_messages(session, window.records, window.summary)
            limits = self.window_limits(session.scene, state.correction, session=session)
            folded, failed = await self.compactor.fold_or_fail(
                session,
                records=window.records,
                cut=cut,
                previous=window.summary,
                messages=whole,
                turn_id=state.turn_id,
                why="trim" if within is None else "overflow",
                bound=limits.summary_bound,
                within=within,
                narrow=narrow,
            )
            persist = not failed  # a failed fold: the cut waits, nothing leaves for good
            summary = folded or summary
        records = window.records[cut:]
        if persist:  # a cut is persisted like a move: the next call never undoes it
            await self.store.set_window_start(session.id, records[0].id)
        targets = await self._quote_targets(session, records)
        projection = self._project(records, session, window.blocks, targets)
        kept = replace(window, records=records, projection=projection, summary=summary)
        register_shown(window.aliases, projection, session.key.chat_id)
        if summary is not None:
            for alias, message_id in summary.aliases:
                window.aliases.register(alias, session.key.chat_id, message_id)
        before = state.history_end - state.history_start
        tail = state.messages[state.history_end :]
        state.crumb = True
        self._lay_out(state, kept, tail=tail)
        return count, before - (state.history_end - state.history_start)

    async def forget(self, state: TurnState, message_ids: frozenset[int]) -> None:
        """Render the window again with `message_ids` deleted (a tool deleted them during
        the turn): the turn's next calls show `[deleted]` where they were, as every later
        turn does (storage has already forgotten them). This turn's tool steps stay."""
        window = state.window
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
            for trace in traces:  # a search hit that showed it
                body = without_deleted_lines(body, trace)
            return record if body is record.body else replace(record, body=body)

        records = tuple(map(erased, window.records))
        if all(new is old for new, old in zip(records, window.records, strict=True)):
            return
        targets = await self._quote_targets(state.session, records)
        projection = self._project(records, state.session, window.blocks, targets)
        tail = state.messages[state.history_end :]
        self._lay_out(state, replace(window, records=records, projection=projection), tail=tail)

    def _lay_out(
        self, state: TurnState, window: TurnWindow, *, tail: Sequence[ChatMessage]
    ) -> None:
        """Put the head (system prompt, and the breadcrumb and summary when earlier history
        is out), the window's messages without orphaned tool steps, and this turn's tool
        steps in `state.messages`."""
        head = self.head(state.session, has_earlier=state.crumb, summary=window.summary)
        projection = window.projection
        history = list(remove_orphaned_tool_messages(projection.messages))
        index = projection.current_message_index
        current = (
            len(history)
            if index is None
            else next(i for i, m in enumerate(history) if m is projection.messages[index])
        )
        if window.images and index is not None and current < len(history):
            # the turn's images ride on the current message, for this turn's calls only
            carrier = history[current]
            history[current] = with_token_estimate(replace(carrier, images=window.images))
        state.window = window
        state.messages = IndexedHistory([*head, *history, *tail])
        state.history_start = len(head)
        state.history_end = len(head) + len(history)
        state.current_index = len(head) + current
        # the history's turns: the breadcrumb and the summary block before it are not turns
        state.kept_turns = count_turns(state.messages[: state.history_end], state.history_start)

    def route_correction(self, session: SessionInfo) -> TokenCorrection:
        route = self.routes.resolve(session.route)
        return self.correction(route.profile, route.model)

    def window_limits(
        self,
        scene: Scene,
        correction: TokenCorrection = NO_CORRECTION,
        *,
        session: SessionInfo | None = None,
    ) -> WindowLimits:
        """The scene's window limits; the summary's bound is reserved inside its budget.
        Budgets are real tokens; the window counts our estimate (`correction`).

        With `session`, the budget is also clamped to what the runtime budget of its route
        leaves (`history_room`), so the chunked, persisted window is what binds and the
        proactive trim is only the safety net for one oversized turn."""
        history_budget = self.window_policy.history_budgets.of(scene)
        if session is not None:
            room = self.history_room(session, correction)
            if room is not None:
                history_budget = min(history_budget, room) if history_budget > 0 else room
        reserve = 0
        if self.compactor is not None:  # a quarter of the clamped budget at most
            configured = self.compactor.policy.summary_budgets.of(scene)
            reserve = summary_bound(configured, history_budget)
        caps = self.window_policy.caps.of(scene)
        budget = max(1, history_budget - reserve) if history_budget > 0 else 0
        return WindowLimits(
            token_budget=correction.to_estimate(budget) if budget > 0 else 0,
            max_turns=caps.max_turns,
            max_messages=caps.max_messages,
            headroom=self.window_policy.headroom,
            summary_bound=reserve,
        )

    def history_room(self, session: SessionInfo, correction: TokenCorrection) -> int | None:
        """Real tokens the runtime budget leaves the history (summary included): the budget
        less the fixed parts (system prompt, breadcrumb, tool schemas) and the current
        turn's allowance (`CURRENT_TURN_SHARE` of the budget). None when proactive
        trimming is off."""
        route = self.routes.resolve(session.route)
        runtime = self.runtime.effective_context_budget(route.context_window)
        if runtime <= 0:
            return None
        system = ChatMessage(
            role="system", content=self.system_prompt(session.scene, session.key.chat_id)
        )
        fixed = (
            estimate_message_tokens(system)
            + estimate_message_tokens(breadcrumb_message())
            + self.schema_tokens(session.scene)
        )
        allowance = runtime // CURRENT_TURN_SHARE
        return max(1, runtime - correction.apply(fixed) - allowance)

    def head(
        self, session: SessionInfo, *, has_earlier: bool, summary: SummaryRecord | None
    ) -> list[ChatMessage]:
        """System prompt, then the breadcrumb and the summary when earlier history is out."""
        system = ChatMessage(
            role="system", content=self.system_prompt(session.scene, session.key.chat_id)
        )
        head = [ensure_token_estimate(system)]
        if has_earlier:
            head.append(breadcrumb_message())
            if summary is not None:
                head.append(summary_message(summary))
        return head

    async def fold_messages(
        self,
        session: SessionInfo,
        records: Sequence[StoredRecord],
        summary: SummaryRecord | None,
    ) -> list[ChatMessage]:
        """The window as the chat's reply requests show it, without this turn's per-turn
        blocks: what a summary request repeats before its instruction."""
        targets = await self._quote_targets(session, records)
        projection = self._project(records, session, "", targets)
        has_earlier = bool(records) and records[0].parent_id is not None
        return self.head(session, has_earlier=has_earlier, summary=summary) + list(
            projection.messages
        )

    def after_reply(self, session: SessionInfo, *, turn_id: str) -> None:
        """The turn answered and its next window move is near: prepare that move's summary
        in the background (one at a time per session), so the move waits for no model."""
        compactor = self.compactor
        if compactor is None or compactor.preparing(session.id):
            return
        compactor.in_background(session.id, self._prepare_next_fold(session, turn_id))

    async def _prepare_next_fold(self, session: SessionInfo, turn_id: str) -> None:
        """Load the window as it stands after the reply, plan where its next move will
        start (`predict_cut`), and fold what that move drops, unless a summary prepared
        earlier already serves it (`usable_summary`)."""
        compactor = self.compactor
        if compactor is None:
            return
        # load
        loaded = await self.store.load_history(
            session.id, max_records=self.window_policy.max_records
        )
        session = loaded.session
        records = list(loaded.records)
        summary = await summary_before(self.store, session, records) if loaded.has_earlier else None
        targets = await self._quote_targets(session, records)
        projection = self._project(records, session, "", targets)
        # plan
        costs = turn_costs(projection.messages)
        limits = self.window_limits(session.scene, self.route_correction(session), session=session)
        turn = predict_cut(costs, limits, compactor.policy.prepare_margin)
        if turn is None:
            return
        starts = [projection.record_index[i] for i in costs.starts]
        prepared = await compactor.find_prepared(session, records, starts)
        if usable_summary(turn, prepared, costs, limits) is not None:
            return  # one prepared already serves the next move
        # fold
        head = self.head(session, has_earlier=loaded.has_earlier, summary=summary)
        await compactor.fold_or_fail(
            session,
            records=records,
            cut=starts[turn],
            previous=summary,
            messages=head + list(projection.messages),
            turn_id=turn_id,
            why="prepare",
            bound=limits.summary_bound,
            narrow=await self.fold_messages(session, records[: starts[turn]], summary),
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
            current_index=current_record_index(records),
            scene=session.scene,
            zone=self.prompt.zone,
            locale=self.prompt.locale_of(session.key.chat_id),
            bot_user_id=self.bot_id,
            per_turn_blocks=blocks,
            quote_targets=quote_targets,
            chat_id=session.key.chat_id,
            owner_id=self.prompt.owner_id,
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


def register_shown(aliases: AliasTable, projection: Projection, chat_id: int) -> None:
    """Every alias the projection showed, and the quotes it showed by platform id."""
    for alias, message_id in projection.aliases:
        aliases.register(alias, chat_id, message_id)
    # Only quotes the projection showed by platform id: never a quote from another
    # chat (its id means nothing here), never one the model was not shown.
    for message_id in projection.references:
        aliases.register_reference(message_id)

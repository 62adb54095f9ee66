"""Preparing a turn's request: window, projection, quote targets, per-turn blocks, prompt.

Everything up to the first provider call: load the window's records, select the window
(it moves in chunks, and the move is persisted), project them with the per-turn blocks on
the current message only, and put the system prompt (and the breadcrumb when earlier
history is left out) in front. Tool steps left without their partner (an imported or
edited history) never reach the provider (`remove_orphaned_tool_messages`).

A runtime trim (proactive, or after an overflow) goes through `drop_turns`: whole turns
leave the records and the rest is rendered again, never cut out of the rendered list.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from bot.agent.compactor import Compactor, FoldView, summary_before
from bot.agent.prompt import PromptFacts, TurnContext, build_per_turn_blocks, build_system_prompt
from bot.agent.routes import RouteTable
from bot.agent.turn import TurnPolicy, TurnState, TurnWindow
from bot.context.alias_table import AliasTable
from bot.context.compaction import predict_cut, summary_message
from bot.context.escaping import inline_value
from bot.context.history_trim import HistoryTrimmed, IndexedHistory, breadcrumb_message
from bot.context.orphans import remove_orphaned_tool_messages
from bot.context.projection import (
    Projection,
    current_record_index,
    project,
    without_per_turn_cost,
)
from bot.context.token_correction import NO_CORRECTION, TokenCorrection
from bot.context.tokens import ensure_token_estimate, estimate_message_tokens
from bot.context.turns import count_turns, turn_starts
from bot.context.window import (
    TurnCosts,
    WindowDecision,
    WindowLimits,
    estimate_tool_schema_tokens,
    select_window,
    turn_costs,
)
from bot.domain.ids import Scene
from bot.domain.messages import ChatMessage
from bot.domain.records import StoredRecord, SummaryRecord, UserRecord
from bot.ports import ChatEventStore, Clock, HistoryStore, SessionInfo
from bot.tools.base import Tool

CURRENT_TURN_SHARE = 8
"""The current turn's allowance is 1/8 of the runtime budget (2,000 of 16,000): the window
leaves it for the per-turn blocks and the tool steps of the turn, so a turn of ordinary
size never needs the proactive trim."""

MAX_REACTION_LINES = 10
"""At most this many reactions (the newest) in `[Reactions since your last reply]`."""


class RequestBuilder:
    """Builds the first request of a turn from the stored history.

    `tools` is the runner's live tool table (name → tool): the prompt and the schema cost
    follow it when tools are added."""

    def __init__(
        self,
        *,
        store: HistoryStore,
        routes: RouteTable,
        tools: Mapping[str, Tool],
        clock: Clock,
        policy: TurnPolicy,
        bot_id: int | None,
        bot_name: str,
        correction: Callable[[str, str], TokenCorrection] | None = None,
        compactor: Compactor | None = None,
        reactions: ChatEventStore | None = None,
    ) -> None:
        self.compactor = compactor
        """Folds departing turns into the summary; None: compaction is off."""
        self.store = store
        self.reactions = reactions
        """Where reactions on the bot's messages are read (none shown when unset)."""
        self.correction = correction or (lambda provider, model: NO_CORRECTION)
        """The learned token correction of a route (provider, model)."""
        self.routes = routes
        self.tools = tools
        self.clock = clock
        self.policy = policy
        self.bot_id = bot_id
        self.bot_name = bot_name
        self._reactions_read: OrderedDict[int, datetime] = OrderedDict()
        """Per session: when the newest request read reactions (bot clock), not yet answered."""
        self._reactions_answered: OrderedDict[int, datetime] = OrderedDict()
        """Per session: when the last answered turn read reactions; later ones are new."""

    def reactions_answered(self, session_id: int) -> None:
        """The turn whose request was built last for `session_id` was answered: the reactions
        it showed are not shown again (one that arrived while it ran is)."""
        read = self._reactions_read.pop(session_id, None)
        if read is not None:
            _remember(self._reactions_answered, session_id, read)

    def system_prompt(self, scene: Scene) -> str:
        return build_system_prompt(
            PromptFacts(
                bot_name=self.bot_name,
                scene=scene,
                locale=self.policy.locale,
                tool_names=tuple(self.tools),
                workspace_rules=self.policy.workspace_rules,
                tool_index=tuple(t.summary for t in self.tools.values() if t.summary),
                owner_id=self.policy.owner_id,
            )
        )

    async def prepare(
        self,
        session: SessionInfo,
        *,
        turn_id: str,
        told_user: Sequence[str] = (),
        persist_window: bool = True,
    ) -> tuple[TurnState, AliasTable, list[StoredRecord]]:
        """The turn's state, its alias table and the window's records.

        `persist_window=False` previews without storing a moved window start and without
        calling the summary model (`tgbot context show` is read-only). The turn works with
        the session as loaded with its history (route, scene and window as stored now), not
        as the caller last saw it."""
        policy = self.policy
        loaded = await self.store.load_history(session.id, max_records=policy.max_records)
        session = loaded.session
        route = self.routes.resolve(session.route)
        records = list(loaded.records)
        has_earlier = loaded.has_earlier
        history_budget = policy.scene_budgets.get(session.scene, 0)
        correction = self.correction(route.profile, route.model)
        limits = self.window_limits(session.scene, correction, session=session)
        reactions, reacted = await self._reactions(session, records)
        blocks = build_per_turn_blocks(
            TurnContext(
                now=self.clock.now(),
                zone=policy.zone,
                zone_name=policy.zone_name,
                model=route.model,
                scene=session.scene,
                locale=policy.locale,
                command_prefix=policy.command_prefix,
                told_user=told_user,
                topic=session.title if session.key.thread_id else None,
                reactions=reactions,
            )
        )
        targets = await self._quote_targets(session, records)
        projection = self._project(records, session, blocks, targets)
        costs = turn_costs(without_per_turn_cost(projection, blocks))
        answered = None if policy.count_unanswered_turns else costs.answered
        decision = select_window(costs.tokens, costs.messages, 0, limits, answered=answered)
        # --- compaction hook: the summary standing for what precedes the window
        summary = await summary_before(self.store, session, records) if has_earlier else None
        window_event: HistoryTrimmed | None = None
        persist = persist_window
        if decision.moved and costs.starts:
            cut = projection.record_index[costs.starts[decision.start]]
            # --- compaction hook: fold what departs, or use a prepared summary
            if self.compactor is not None:
                starts = [projection.record_index[i] for i in costs.starts]
                fold = await self.compactor.on_move(
                    session,
                    records=records,
                    cut=cut,
                    turn_starts=starts,
                    costs=costs,
                    limits=limits,
                    previous=summary,
                    messages=lambda: self.fold_messages(session, records, summary),
                    turn_id=turn_id,
                    call_model=persist_window,
                )
                if fold.cut != cut:  # a prepared summary moved the start a little
                    decision = moved_to(decision, costs, starts.index(fold.cut))
                cut, summary = fold.cut, fold.summary
                persist = persist and not fold.failed
            else:
                summary = None
            targets = await self._quote_targets(session, records[cut:])
            records = records[cut:]
            has_earlier = True
            if persist:  # a failed fold: the move waits, nothing leaves for good
                await self.store.set_window_start(session.id, records[0].id)
            window_event = HistoryTrimmed.from_window(
                decision, budget=history_budget, session=session.id, turn_id=turn_id
            )
            projection = self._project(records, session, blocks, targets)
        aliases = AliasTable()
        window = TurnWindow(
            records=tuple(records),
            projection=projection,
            blocks=blocks,
            aliases=aliases,
            summary=summary,
        )
        register_shown(aliases, projection, session.key.chat_id)
        for alias, message_id in reacted:  # the reactions block names them: valid references
            aliases.register(alias, session.key.chat_id, message_id)
        if summary is not None:  # the aliases the summary mentions are valid references
            for alias, message_id in summary.aliases:
                aliases.register(alias, session.key.chat_id, message_id)
        state = TurnState(
            session=session,
            route=route,
            turn_id=turn_id,
            messages=IndexedHistory(),
            crumb=has_earlier,
            current_index=0,
            fixed_tokens=0,
            budget=policy.limits.effective_context_budget(route.context_window),
            history_budget=history_budget,
            kept_turns=0,
            dropped_turns=decision.dropped_turns if decision.moved else 0,
            window=window,
            history_start=0,
            history_end=0,
            correction=correction,
        )
        self._lay_out(state, window, tail=[])
        state.fixed_tokens = estimate_message_tokens(
            state.messages[0]
        ) + estimate_tool_schema_tokens([t.spec.schema() for t in self.tools.values()])
        if window_event is not None:
            state.pending_trims.append(window_event)
        if self.compactor is not None:  # compaction hook: is the next move near?
            kept = (
                costs
                if window_event is None
                else turn_costs(without_per_turn_cost(projection, blocks))
            )
            margin = policy.compaction_margin
            state.fold_soon = predict_cut(kept, limits, margin) is not None
        return state, aliases, records

    async def drop_turns(self, state: TurnState, count: int) -> tuple[int, int]:
        """Drop the `count` oldest whole turns of the window from its records, then render
        the rest again (docs/architecture.md, Rendering a message): the first kept message
        opens the window (date, full sender name) and a quote of a dropped message degrades
        to its inline line.

        This turn's tool steps after the window stay as they are; the newest turn is never
        dropped. Returns (turns, messages) dropped from the rendered window: (0, 0) when
        nothing could be dropped."""
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
            folded, failed = await self.compactor.fold_or_fail(
                session,
                records=window.records,
                cut=cut,
                previous=window.summary,
                messages=await self.fold_messages(session, window.records, window.summary),
                turn_id=state.turn_id,
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

    def _lay_out(
        self, state: TurnState, window: TurnWindow, *, tail: Sequence[ChatMessage]
    ) -> None:
        """Put the head (system prompt, and the breadcrumb and summary when earlier history
        is out), the window's messages without orphaned tool steps, and this turn's tool
        steps in `state.messages`."""
        head = self.head(state.session, has_earlier=state.crumb, summary=window.summary)
        projection = window.projection
        history = remove_orphaned_tool_messages(projection.messages)
        index = projection.current_message_index
        current = (
            len(history)
            if index is None
            else next(i for i, m in enumerate(history) if m is projection.messages[index])
        )
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
        policy = self.policy
        history_budget = policy.scene_budgets.get(scene, 0)
        if session is not None:
            room = self.history_room(session, correction)
            if room is not None:
                history_budget = min(history_budget, room) if history_budget > 0 else room
        reserve = policy.summary_budget(scene) if self.compactor is not None else 0
        caps = policy.caps(scene)
        budget = max(1, history_budget - reserve) if history_budget > 0 else 0
        return WindowLimits(
            token_budget=correction.to_estimate(budget) if budget > 0 else 0,
            max_turns=caps.max_turns,
            max_messages=caps.max_messages,
            headroom=policy.headroom,
        )

    def history_room(self, session: SessionInfo, correction: TokenCorrection) -> int | None:
        """Real tokens the runtime budget leaves the history (summary included): the budget
        less the fixed parts (system prompt, breadcrumb, tool schemas) and the current
        turn's allowance (`CURRENT_TURN_SHARE` of the budget). None when proactive
        trimming is off."""
        route = self.routes.resolve(session.route)
        runtime = self.policy.limits.effective_context_budget(route.context_window)
        if runtime <= 0:
            return None
        system = ChatMessage(role="system", content=self.system_prompt(session.scene))
        fixed = (
            estimate_message_tokens(system)
            + estimate_message_tokens(breadcrumb_message())
            + estimate_tool_schema_tokens([t.spec.schema() for t in self.tools.values()])
        )
        allowance = runtime // CURRENT_TURN_SHARE
        return max(1, runtime - correction.apply(fixed) - allowance)

    def head(
        self, session: SessionInfo, *, has_earlier: bool, summary: SummaryRecord | None
    ) -> list[ChatMessage]:
        """System prompt, then the breadcrumb and the summary when earlier history is out."""
        system = ChatMessage(role="system", content=self.system_prompt(session.scene))
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

    async def fold_view(self, session: SessionInfo) -> FoldView:
        """The window as it stands after a reply (for preparing the next summary)."""
        loaded = await self.store.load_history(session.id, max_records=self.policy.max_records)
        session = loaded.session
        records = list(loaded.records)
        summary = await summary_before(self.store, session, records) if loaded.has_earlier else None
        targets = await self._quote_targets(session, records)
        projection = self._project(records, session, "", targets)
        costs = turn_costs(projection.messages)
        head = self.head(session, has_earlier=loaded.has_earlier, summary=summary)
        return FoldView(
            session=session,
            records=records,
            costs=costs,
            turn_starts=[projection.record_index[i] for i in costs.starts],
            limits=self.window_limits(
                session.scene, self.route_correction(session), session=session
            ),
            summary=summary,
            messages=head + list(projection.messages),
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
            zone=self.policy.zone,
            locale=self.policy.locale,
            bot_user_id=self.bot_id,
            per_turn_blocks=blocks,
            quote_targets=quote_targets,
            chat_id=session.key.chat_id,
            owner_id=self.policy.owner_id,
        )

    async def _reactions(
        self, session: SessionInfo, records: Sequence[StoredRecord]
    ) -> tuple[tuple[str, ...], tuple[tuple[str, int], ...]]:
        """`Alice 👍 on m12` for each reaction on the bot's messages since its last turn on
        the loaded path (or since the oldest loaded record when no reply is loaded), newest
        `MAX_REACTION_LINES`, and the (alias, platform id) of every alias a line names: they
        join the turn's alias table. Old messages never re-render: the block rides on this
        turn.

        "Since its last turn" is read as since the newest member message before the last
        reply (the one that turn answered): a reaction handled while that turn ran, after
        its request was built, is shown now instead of never."""
        if self.reactions is None or not records:
            return (), ()
        last_reply = max((i for i, r in enumerate(records) if r.kind == "assistant"), default=None)
        since = records[0].created_at
        if last_reply is not None:
            asked = [r.created_at for r in records[:last_reply] if r.kind == "user"]
            since = max(asked) if asked else records[last_reply].created_at
        # On the bot's own clock, when this process answered a turn here: exact (a message's
        # date is Telegram's, to the second). After a restart the rule above stands alone.
        answered = self._reactions_answered.get(session.id)
        if answered is not None:
            since = max(since, answered)
        _remember(self._reactions_read, session.id, self.clock.now())
        found = await self.reactions.reactions_since(
            session.key.chat_id, session.key.thread_id, since, limit=MAX_REACTION_LINES
        )
        if not found:
            return (), ()
        aliases = dict(self._loaded_aliases(records))
        missing = {r.message_id for r in found} - set(aliases)
        if missing:
            aliases.update(await self.store.find_aliases(session.id, missing))
        lines = tuple(
            f"{inline_value(r.user_name) or r.user_id} {inline_value(r.emoji)} on "
            f"{aliases.get(r.message_id, f'message {r.message_id}')}"
            for r in found
        )
        shown = tuple(
            (aliases[r.message_id], r.message_id) for r in found if r.message_id in aliases
        )
        return lines, shown

    @staticmethod
    def _loaded_aliases(records: Sequence[StoredRecord]) -> dict[int, str]:
        return {
            mid: alias
            for record in records
            for mid, alias in zip(record.message_ids, record.alias_parts, strict=False)
            if mid is not None and alias is not None
        }

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


def moved_to(decision: WindowDecision, costs: TurnCosts, start: int) -> WindowDecision:
    """`decision` with the window starting at turn `start` instead (what it kept and left)."""
    before = decision.start - decision.dropped_turns
    return replace(
        decision,
        start=start,
        tokens=sum(costs.tokens[start:]),
        kept_turns=len(costs.tokens) - start,
        dropped_turns=start - before,
        dropped_messages=sum(costs.messages[before:start]),
    )


MAX_REACTION_CURSORS = 4_096
"""Sessions whose reaction read times are kept (the oldest are forgotten first)."""


def _remember(cursors: OrderedDict[int, datetime], session_id: int, at: datetime) -> None:
    cursors[session_id] = at
    cursors.move_to_end(session_id)
    while len(cursors) > MAX_REACTION_CURSORS:
        cursors.popitem(last=False)

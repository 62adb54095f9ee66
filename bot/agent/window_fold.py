"""What leaves a turn's window: folded into the summary, and the window shrinking during a turn.

`WindowFolds` serves one `Windows` (`bot.agent.window`): `fold` is the one fold site (a move
in `Windows.open`, a trim or an overflow in `drop_oldest`, the next move prepared in the
background after a reply by `prepare_next`); `drop_oldest` and `forget` change a turn's
window while the turn runs. None of it runs on a turn whose window keeps its start.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Protocol

from bot.agent.compactor import FoldReason, summary_before
from bot.agent.window_state import ConversationWindow, LoadedWindow, WindowPolicy
from bot.context.memory_block import without_facts
from bot.context.prepared_summary import usable_summary
from bot.context.turns import turn_starts
from bot.context.window import WindowLimits
from bot.context.window_plan import predict_cut
from bot.domain.erasure import (
    deleted_trace,
    erased_body,
    without_content_of,
    without_deleted_lines,
    without_quoted_text,
)
from bot.domain.messages import ChatMessage
from bot.domain.records import StoredRecord, SummaryRecord, UserRecord
from bot.ports import SessionInfo

if TYPE_CHECKING:
    from bot.agent.compactor import Compactor
    from bot.agent.request import RequestBuilder
    from bot.context.projection import Projection
    from bot.ports import LoadedHistory
    from bot.store_ports import HistoryStore


@dataclass(frozen=True, slots=True)
class Folded:
    """What a fold did: the new summary (None: none new), and `through`, the record index up
    to which what leaves may leave for good (the summary, if any, ends right before it)."""

    summary: SummaryRecord | None
    through: int


class WindowOwner(Protocol):
    """What the folds need of the `Windows` they serve: its store, policy, prompt and
    compactor, and its one way to load, project and render a window."""

    store: HistoryStore
    policy: WindowPolicy
    prompt: RequestBuilder
    compactor: Compactor | None

    async def load(
        self,
        history: LoadedHistory,
        blocks: str,
        previous: SummaryRecord | None,
        *,
        detached: bool = False,
    ) -> LoadedWindow: ...

    async def project(
        self,
        session: SessionInfo,
        records: Sequence[StoredRecord],
        blocks: str,
        *,
        detached: bool = False,
    ) -> Projection: ...

    async def render(
        self, window: ConversationWindow, records: tuple[StoredRecord, ...]
    ) -> None: ...


class WindowFolds:
    """The folds and the in-turn shrinking of the windows `windows` opens."""

    def __init__(self, windows: WindowOwner) -> None:
        self._windows = windows

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
        compactor = self._windows.compactor
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
        compactor = self._windows.compactor
        assert compactor is not None
        projection = await self._windows.project(session, records[:cut], "")
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
            await self._windows.store.set_window_start(session.id, window.records[fold.through].id)
        # the summary shown ends right before the window, or none is shown (the breadcrumb
        # alone): the model never reads a summary, then a gap, then the window
        window.summary = (fold.summary or window.summary) if fold.through == cut else None
        window.crumb = True
        await self._windows.render(window, records)
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
        await self._windows.render(window, window.records)
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
        await self._windows.render(window, records)
        return True

    def prepare_next(self, session: SessionInfo, *, turn_id: str) -> None:
        """The turn answered and its next window move is near: prepare that move's summary
        in the background (one at a time per session), so the move waits for no model."""
        compactor = self._windows.compactor
        if compactor is None or compactor.preparing(session.id):
            return
        compactor.in_background(session.id, self._prepare_next(session, turn_id))

    async def _prepare_next(self, session: SessionInfo, turn_id: str) -> None:
        """Load the window as it stands after the reply, plan where its next move will
        start (`predict_cut`), and fold what that move drops, unless a summary prepared
        earlier already serves it (`usable_summary`)."""
        compactor = self._windows.compactor
        if compactor is None:
            return
        history = await self._windows.store.load_history(
            session.id, max_records=self._windows.policy.max_records
        )
        start = await self._windows.load(history, "", None)
        session, records, limits = start.session, start.records, start.limits
        turn = predict_cut(start.costs, limits, compactor.policy.prepare_margin)
        if turn is None:
            return
        prepared = await compactor.find_prepared(session, records, start.starts)
        if usable_summary(turn, prepared, start.costs, limits) is not None:
            return  # one prepared already serves the next move
        # read only when a fold follows (not for a move a prepared summary already serves)
        summary = (
            await summary_before(self._windows.store, session, records) if start.earlier else None
        )
        await self.fold(session, records, start.starts[turn], summary, limits, turn_id, "prepare")

    async def fold_messages(
        self,
        session: SessionInfo,
        records: Sequence[StoredRecord],
        summary: SummaryRecord | None,
    ) -> list[ChatMessage]:
        """The window as the chat's reply requests show it, without this turn's per-turn
        blocks: what a summary request repeats before its instruction."""
        projection = await self._windows.project(session, records, "")
        has_earlier = bool(records) and records[0].parent_id is not None
        head = self._windows.prompt.head(session, has_earlier=has_earlier, summary=summary)
        return head + list(projection.messages)

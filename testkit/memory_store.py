"""`InMemoryStore`: the SQL store's contract in dictionaries, for tests and fakes.

It passes the same contract tests as `SqlStore` (tests/test_storage/test_contract.py).
Simplicity over speed: aliases are recomputed over the whole path on every read, with
the pure derivation of `storage.alias_cache` (the definition the SQL cache must match).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime
from typing import Any

from bot.clock import SYSTEM_CLOCK
from bot.domain.erasure import (
    deleted_trace,
    erased_body,
    without_content_of,
    without_deleted_lines,
    without_quoted_text,
)
from bot.domain.ids import Scene, SessionKey
from bot.domain.platform_messages import PlatformMessage
from bot.domain.records import RecordBody, StoredRecord, SummaryRecord
from bot.errors import SessionNotFound, StorageError
from bot.ports import (
    Clock,
    InboundAppend,
    LoadedHistory,
    LoadedTurn,
    NewRecord,
    SessionInfo,
    SessionRequest,
    StoredReaction,
)
from bot.store_ports import ConversationStore
from storage.alias_cache import aliases_on_path, derive_path, path_to
from storage.codec import alias_parts, utc
from storage.queries import AWAITING_KINDS
from storage.reaction_codec import latest_reactions
from storage.retention import Node, PruneResult, plan_prune
from storage.search import Term, index_tokens
from storage.search_query import matched_terms, query_terms


@dataclass(slots=True)
class _Record:
    id: int
    session_id: int
    parent_id: int | None
    created_at: datetime
    body: RecordBody
    message_ids: tuple[int | None, ...]
    tokens: int


@dataclass(slots=True)
class _Session:
    info: SessionInfo
    alias_root_base: int = 0


class InMemoryStore:
    """`bot.store_ports.ConversationStore` in dictionaries: the contract of `SqlStore`."""

    def __init__(self, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self._now = clock.now
        self._sessions: dict[int, _Session] = {}
        self._records: dict[int, _Record] = {}
        self._platform_messages: dict[tuple[int, int], PlatformMessage] = {}
        self._updates: dict[int, datetime] = {}
        self._summaries: set[date] = set()
        self._reactions: list[StoredReaction] = []
        self._next_session = 1
        self._next_record = 1

    async def close(self) -> None:
        return None

    # ------------------------------------------------------------ sessions

    async def open_session(
        self, key: SessionKey, *, scene: Scene, title: str | None = None
    ) -> SessionInfo:
        for session in self._sessions.values():
            if session.info.key == key:
                info = replace(
                    session.info,
                    scene=scene,
                    title=session.info.title if title is None else title,
                )
                session.info = info
                return info
        info = SessionInfo(id=self._next_session, key=key, scene=scene, title=title)
        self._sessions[info.id] = _Session(info)
        self._next_session += 1
        return info

    async def find_session(self, key: SessionKey) -> SessionInfo | None:
        return next((s.info for s in self._sessions.values() if s.info.key == key), None)

    async def list_sessions(self) -> tuple[SessionInfo, ...]:
        return tuple(self._sessions[sid].info for sid in sorted(self._sessions))

    async def sessions_awaiting_answer(self, since: datetime) -> tuple[SessionInfo, ...]:
        found = []
        for sid in sorted(self._sessions):
            info = self._sessions[sid].info
            leaf = self._records.get(info.active_leaf_id or 0)
            if (
                leaf is not None
                and not info.closed
                and leaf.body.kind in AWAITING_KINDS
                and leaf.created_at >= since
            ):
                found.append(info)
        return tuple(found)

    async def set_route(self, session_id: int, route: str | None) -> None:
        session = self._session(session_id)
        session.info = replace(session.info, route=route)

    async def set_active_leaf(self, session_id: int, record_id: int) -> None:
        session = self._session(session_id)
        self._record_in(session_id, record_id)
        session.info = replace(session.info, active_leaf_id=record_id)

    async def set_window_start(self, session_id: int, record_id: int | None) -> None:
        session = self._session(session_id)
        if record_id is not None:
            self._record_in(session_id, record_id)
        session.info = replace(session.info, window_start_id=record_id)

    # ------------------------------------------------------------ records

    async def load_history(self, session_id: int, *, max_records: int) -> LoadedHistory:
        session = self._session(session_id)
        leaf = session.info.active_leaf_id
        path = self._aliased_path(session, leaf)
        next_seq = (self._last_seq(session, leaf)) + 1
        start = max(0, len(path) - max(0, max_records))
        starts = [i for i, r in enumerate(path) if r.id == session.info.window_start_id]
        if starts:
            start = max(start, starts[0])
        records = tuple(path[start:]) if max_records > 0 else ()
        return LoadedHistory(
            session=session.info,
            records=records,
            has_earlier=(records[0].parent_id is not None) if records else bool(path),
            next_alias_seq=next_seq,
        )

    async def load_turn(
        self, session_id: int, *, max_records: int, reactions_limit: int
    ) -> LoadedTurn:
        """See `bot.ports.LoadedTurn`."""
        history = await self.load_history(session_id, max_records=max_records)
        if not history.records:
            return LoadedTurn(history=history, summaries=(), reactions=())
        first = history.records[0]
        key = history.session.key
        summaries = (
            await self.find_summaries(session_id, [first.parent_id])
            if first.parent_id is not None
            else ()
        )
        reactions = await self.reactions_since(
            key.chat_id, key.thread_id, first.created_at, limit=reactions_limit
        )
        return LoadedTurn(history=history, summaries=summaries, reactions=reactions)

    async def find_aliases(self, session_id: int, message_ids: Collection[int]) -> dict[int, str]:
        session = self._session(session_id)
        path = self._aliased_path(session, session.info.active_leaf_id)
        return aliases_on_path(((r.alias_seq, r.message_ids) for r in path), set(message_ids))

    async def load_path(
        self, session_id: int, leaf_id: int | None = None
    ) -> tuple[StoredRecord, ...]:
        session = self._session(session_id)
        leaf = session.info.active_leaf_id if leaf_id is None else leaf_id
        if leaf is not None:
            self._record_in(session_id, leaf)
        return tuple(self._aliased_path(session, leaf))

    async def find_summaries(
        self, session_id: int, parent_ids: Collection[int]
    ) -> tuple[StoredRecord, ...]:
        wanted = set(parent_ids)
        found = [
            r
            for r in self._records.values()
            if r.session_id == session_id and r.body.kind == "summary" and r.parent_id in wanted
        ]
        records = [self._stored(r.id) for r in sorted(found, key=lambda r: r.id)]
        return tuple(r for r in records if r is not None)

    def _stored(self, record_id: int) -> StoredRecord | None:
        """One record with the aliases of its own path, or None."""
        record = self._records.get(record_id)
        if record is None:
            return None
        return self._aliased_path(self._sessions[record.session_id], record_id)[-1]

    async def append(
        self,
        session_id: int,
        records: Sequence[NewRecord],
        *,
        parent_id: int | None = None,
        platform_messages: Sequence[PlatformMessage] = (),
        move_leaf: bool = True,
        at_root: bool = False,
    ) -> tuple[StoredRecord, ...]:
        if not records:
            raise ValueError("append needs at least one record")
        session = self._session(session_id)
        parent = (
            None if at_root else session.info.active_leaf_id if parent_id is None else parent_id
        )
        if parent is not None:
            self._record_in(session_id, parent)
        first_new = self._next_record
        for message in platform_messages:
            # What the foreign key does in SQL: checked before anything changes.
            known = message.record_id is None or message.record_id in self._records
            if not known and not first_new <= (message.record_id or 0) < first_new + len(records):
                raise StorageError(f"message names unknown record {message.record_id}")
        ids: list[int] = []
        for record in records:
            new = _Record(
                id=self._next_record,
                session_id=session_id,
                parent_id=parent,
                created_at=utc(record.created_at),
                body=record.body,
                message_ids=tuple(record.message_ids),
                tokens=record.tokens,
            )
            self._records[new.id] = new
            self._next_record += 1
            ids.append(new.id)
            parent = new.id
        self._put_platform_messages(platform_messages, default_record_id=ids[-1])
        if move_leaf:
            session.info = replace(session.info, active_leaf_id=ids[-1])
        path = {r.id: r for r in self._aliased_path(session, ids[-1])}
        return tuple(path[i] for i in ids)

    async def open_sessions(self, requests: Sequence[SessionRequest]) -> tuple[SessionInfo, ...]:
        return tuple(
            [await self.open_session(r.key, scene=r.scene, title=r.title) for r in requests]
        )

    async def append_inbound(
        self, items: Sequence[InboundAppend]
    ) -> tuple[StoredRecord | None, ...]:
        stored: list[StoredRecord | None] = []
        for item in items:
            key = (item.platform_message.chat_id, item.platform_message.message_id)
            if key in self._platform_messages or item.session_id not in self._sessions:
                stored.append(None)
                continue
            (record,) = await self.append(
                item.session_id, [item.record], platform_messages=[item.platform_message]
            )
            stored.append(record)
        return tuple(stored)

    async def set_message_ids(
        self, record_id: int, message_ids: Sequence[int | None]
    ) -> StoredRecord:
        record = self._records.get(record_id)
        if record is None:
            raise SessionNotFound(f"no record {record_id}")
        record.message_ids = tuple(message_ids)
        found = self._stored(record_id)
        assert found is not None
        return found

    # ------------------------------------------------------------ platform messages

    async def record_platform_messages(self, messages: Sequence[PlatformMessage]) -> None:
        for message in messages:
            if message.record_id is not None and message.record_id not in self._records:
                raise StorageError(f"message names unknown record {message.record_id}")
        self._put_platform_messages(messages, default_record_id=None)

    async def find_platform_message(self, chat_id: int, message_id: int) -> PlatformMessage | None:
        return self._platform_messages.get((chat_id, message_id))

    async def seen_in_groups(self, user_id: int, chat_ids: Sequence[int]) -> bool:
        """`bot.services.private_members.SeenInGroups` (`storage.group_members` on SQL)."""
        return any(
            m.sender_id == user_id and m.chat_id < 0 and (not chat_ids or m.chat_id in chat_ids)
            for m in self._platform_messages.values()
        )

    async def erase_message(
        self, chat_id: int, message_id: int, *, keep_media: bool = False
    ) -> bool:
        """See `bot.store_ports.PlatformMessages.erase_message` (`storage.erase` on SQL)."""
        known = self._platform_messages.get((chat_id, message_id))
        if known is None:
            return False
        trace = deleted_trace(known.text)
        blank = replace(known, text="") if keep_media else replace(known, text="", media=())
        self._platform_messages[(chat_id, message_id)] = blank
        sessions = {sid for sid, s in self._sessions.items() if s.info.key.chat_id == chat_id}
        for record in self._records.values():
            if record.session_id not in sessions:
                continue
            first = next((mid for mid in record.message_ids if mid is not None), None)
            if first == message_id or record.id == known.record_id:
                stored = self._stored(record.id)
                assert stored is not None
                texts = {
                    mid: m.text
                    for mid in record.message_ids
                    if mid is not None and (m := self._platform_messages.get((chat_id, mid)))
                }
                record.body = erased_body(stored, message_id, texts, keep_media=keep_media)
            else:
                record.body = without_quoted_text(record.body, message_id)
                record.body = without_content_of(record.body, message_id)
                if trace is not None:
                    record.body = without_deleted_lines(record.body, trace)
        return True

    async def search_messages(
        self, chat_id: int, thread_id: int, query: str, *, limit: int
    ) -> tuple[PlatformMessage, ...]:
        """The same tokens and ranking as the SQL stores (`storage.search`), by a scan."""
        terms = query_terms(query)
        if not terms or limit <= 0:
            return ()
        candidates = (
            (message, message.text)
            for message in self._platform_messages.values()
            if message.chat_id == chat_id and message.thread_id == thread_id
        )
        ranked = rank_texts(
            terms, candidates, newest_key=lambda message: (message.date, message.message_id)
        )
        return tuple(ranked[:limit])

    def _put_platform_messages(
        self, messages: Sequence[PlatformMessage], *, default_record_id: int | None
    ) -> None:
        for message in messages:
            key = (message.chat_id, message.message_id)
            old = self._platform_messages.get(key)
            record_id = message.record_id if message.record_id is not None else default_record_id
            new = replace(
                message,
                date=utc(message.date),
                edited_at=None if message.edited_at is None else utc(message.edited_at),
                record_id=record_id,
            )
            if old is not None:
                new = replace(
                    new,
                    date=old.date,
                    record_id=old.record_id if record_id is None else record_id,
                    edited_at=old.edited_at if new.edited_at is None else new.edited_at,
                )
            self._platform_messages[key] = new

    # ------------------------------------------------------------ claims

    async def claim_update(self, update_id: int) -> bool:
        if update_id in self._updates:
            return False
        self._updates[update_id] = self._now()
        return True

    async def claim_daily_summary(self, day: date) -> bool:
        if day in self._summaries:
            return False
        self._summaries.add(day)
        return True

    # ------------------------------------------------------------ chat events

    async def set_chat_closed(self, chat_id: int, closed: bool) -> int:
        changed = 0
        for session in self._sessions.values():
            if session.info.key.chat_id == chat_id and session.info.closed != closed:
                session.info = replace(session.info, closed=closed)
                changed += 1
        return changed

    async def is_chat_closed(self, chat_id: int) -> bool:
        return any(s.info.closed and s.info.key.chat_id == chat_id for s in self._sessions.values())

    async def record_reactions(self, reactions: Sequence[StoredReaction]) -> None:
        """One per member, message and emoji: a toggle replaces the member's earlier one."""
        new = [replace(r, created_at=utc(r.created_at)) for r in latest_reactions(reactions)]
        keys = {(r.chat_id, r.message_id, r.user_id, r.emoji) for r in new}
        self._reactions = [
            r for r in self._reactions if (r.chat_id, r.message_id, r.user_id, r.emoji) not in keys
        ]
        self._reactions.extend(new)

    async def reactions_since(
        self, chat_id: int, thread_id: int, since: datetime | None, *, limit: int
    ) -> tuple[StoredReaction, ...]:
        found = [
            r
            for r in self._reactions
            if r.chat_id == chat_id
            and r.thread_id == thread_id
            and (since is None or r.created_at > utc(since))
        ]
        found.sort(key=lambda r: r.created_at)  # stable: equal times keep insertion order
        return tuple(found[-limit:]) if limit > 0 else ()

    async def reactions_between(self, start: datetime, end: datetime) -> tuple[StoredReaction, ...]:
        found = [r for r in self._reactions if utc(start) <= r.created_at < utc(end)]
        return latest_reactions(found)

    # ------------------------------------------------------------ retention

    async def prune(
        self, older_than: datetime, *, events_older_than: datetime | None = None
    ) -> PruneResult:
        cutoff = utc(older_than)
        events_cutoff = cutoff if events_older_than is None else utc(events_older_than)
        removed = 0
        for session in self._sessions.values():
            nodes = [
                Node(r.id, r.parent_id, r.created_at, isinstance(r.body, SummaryRecord))
                for r in self._records.values()
                if r.session_id == session.info.id
            ]
            plan = plan_prune(
                nodes,
                active_leaf_id=session.info.active_leaf_id,
                window_start_id=session.info.window_start_id,
                older_than=cutoff,
            )
            if not plan.delete or plan.new_root is None or plan.last_removed is None:
                continue
            session.alias_root_base = self._last_seq(session, plan.last_removed)
            self._records[plan.new_root].parent_id = None
            for record_id in plan.delete:
                del self._records[record_id]
            for key, message in list(self._platform_messages.items()):
                if message.record_id in plan.delete:
                    self._platform_messages[key] = replace(message, record_id=None)
            removed += len(plan.delete)
        old_messages = [k for k, e in self._platform_messages.items() if e.date < events_cutoff]
        for key in old_messages:
            del self._platform_messages[key]
        self._reactions = [r for r in self._reactions if r.created_at >= events_cutoff]
        old_updates = [u for u, at in self._updates.items() if at < events_cutoff]
        for update_id in old_updates:
            del self._updates[update_id]
        return PruneResult(
            records=removed, platform_messages=len(old_messages), updates=len(old_updates)
        )

    # ------------------------------------------------------------ helpers

    def _session(self, session_id: int) -> _Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise SessionNotFound(f"no session {session_id}")
        return session

    def _record_in(self, session_id: int, record_id: int) -> _Record:
        record = self._records.get(record_id)
        if record is None or record.session_id != session_id:
            raise SessionNotFound(f"no record {record_id} in session {session_id}")
        return record

    def _path(self, leaf_id: int | None) -> list[_Record]:
        ids = path_to(leaf_id, lambda record_id: self._records[record_id].parent_id)
        return [self._records[record_id] for record_id in ids]

    def _aliased_path(self, session: _Session, leaf_id: int | None) -> list[StoredRecord]:
        path = self._path(leaf_id)
        derived = derive_path(session.alias_root_base, (r.message_ids for r in path))
        return [
            StoredRecord(
                id=record.id,
                session_id=record.session_id,
                parent_id=record.parent_id,
                created_at=record.created_at,
                body=record.body,
                message_ids=record.message_ids,
                tokens=record.tokens,
                alias_seq=cache.seq,
                alias_parts=alias_parts(cache.seq, record.message_ids),
            )
            for record, cache in zip(path, derived, strict=True)
        ]

    def _last_seq(self, session: _Session, leaf_id: int | None) -> int:
        derived = derive_path(session.alias_root_base, (r.message_ids for r in self._path(leaf_id)))
        return derived[-1].last if derived else session.alias_root_base


def _satisfies_the_ports(store: InMemoryStore) -> ConversationStore:
    """Checked by mypy: the store implements `bot.store_ports.ConversationStore`."""
    return store


def rank_texts(
    terms: Sequence[Term], candidates: Iterable[tuple[Any, str]], *, newest_key: Any
) -> list[Any]:
    """Candidates (item, text) that match, best first: most terms, then newest (the SQL
    stores rank in the database)."""
    scored = []
    for item, body in candidates:
        score = matched_terms(terms, index_tokens(body))
        if score:
            scored.append((score, newest_key(item), item))
    scored.sort(key=lambda entry: (entry[0], entry[1]), reverse=True)
    return [item for _score, _key, item in scored]

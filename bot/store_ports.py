"""The store's ports, one per role: sessions, history, platform messages, search, chat
events, claims.

A consumer takes the roles it calls (the composition root hands the same store under each
type). The stores (`storage.sql.SqlStore`; `testkit.memory_store.InMemoryStore`, not
shipped) implement all of them: `ConversationStore`, which only the composition root
(`bot/app`) names (`tests/test_architecture.py` checks it). The values the ports carry
(`SessionInfo`, `NewRecord`, `PlatformMessage`, ...) are in `bot.ports`; the contract both
stores keep is `tests/test_storage`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import date, datetime
from typing import Literal, Protocol

from bot.context.memory_block import MemoryFact
from bot.domain.ids import Scene, SessionKey
from bot.domain.platform_messages import PlatformMessage
from bot.domain.records import StoredRecord
from bot.ports import (
    InboundAppend,
    LoadedHistory,
    LoadedTurn,
    NewRecord,
    SessionInfo,
    SessionRequest,
    StoredReaction,
)


class SessionStore(Protocol):
    """The conversations the bot keeps (one per chat and topic), their model route and
    where each one's conversation ends (its active leaf)."""

    async def open_session(
        self, key: SessionKey, *, scene: Scene, title: str | None = None
    ) -> SessionInfo:
        """Get the session for `key`, creating it (or updating scene/title) as needed."""
        ...

    async def open_sessions(self, requests: Sequence[SessionRequest]) -> tuple[SessionInfo, ...]:
        """`open_session` for each request, in order (one read when all are known)."""
        ...

    async def find_session(self, key: SessionKey) -> SessionInfo | None: ...

    async def list_sessions(self) -> tuple[SessionInfo, ...]: ...

    async def sessions_awaiting_answer(self, since: datetime) -> tuple[SessionInfo, ...]:
        """Open sessions whose active leaf is a member message or tool results stored at or
        after `since` (the turns a crash may have left unanswered), by id; one query."""
        ...

    async def set_route(self, session_id: int, route: str | None) -> None:
        """A session's model route (what `/model` switches)."""
        ...

    async def set_active_leaf(self, session_id: int, record_id: int) -> None:
        """Move where the session's conversation ends (`/retry`)."""
        ...


class HistoryStore(Protocol):
    """A session's records: a tree whose active path is the conversation, the window's
    start on it, the compaction summaries beside it."""

    async def load_history(self, session_id: int, *, max_records: int) -> LoadedHistory:
        """The active path's tail for the window (see `LoadedHistory`)."""
        ...

    async def load_turn(
        self, session_id: int, *, max_records: int, reactions_limit: int
    ) -> LoadedTurn:
        """What a turn's preparation reads, in one round trip (see `LoadedTurn`)."""
        ...

    async def load_path(
        self, session_id: int, leaf_id: int | None = None
    ) -> tuple[StoredRecord, ...]:
        """The whole branch root → `leaf_id` (the active leaf by default), with aliases (the
        dashboard's conversation browser pages through it)."""
        ...

    async def find_aliases(self, session_id: int, message_ids: Collection[int]) -> dict[int, str]:
        """Aliases of the platform ids in `message_ids` held by records on the active path
        (`m<n>`, or `m<n>.<slot>` for a later bubble), so quotes of messages outside the
        window keep their alias. Records off the active path give none."""
        ...

    async def find_summaries(
        self, session_id: int, parent_ids: Collection[int]
    ) -> tuple[StoredRecord, ...]:
        """Summary records (kind `summary`, stored off the active path) whose parent is one
        of `parent_ids`, oldest first."""
        ...

    async def set_window_start(self, session_id: int, record_id: int | None) -> None:
        """Move the first record of the history window."""
        ...

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
        """Append a chain of records atomically, with the platform messages that belong to
        them.

        The chain hangs under `parent_id`, or under the active leaf when `None`, or starts a
        new root (a sibling of the first record, e.g. an edit of it) when `at_root`. Messages
        whose `record_id` is `None` are linked to the last appended record. When `move_leaf`
        the active leaf becomes the last record.
        """
        ...

    async def append_inbound(
        self, items: Sequence[InboundAppend]
    ) -> tuple[StoredRecord | None, ...]:
        """Group commit of inbound messages (one `getUpdates` batch, one transaction).

        Store the items in one transaction, in order (each session's records chain in
        item order). An item whose platform message (chat id + message id) is stored, or
        appears earlier in `items`, is a duplicate: not stored, None. An item that cannot
        be stored (bad data) is logged and skipped, None; the others are stored. A failed
        transaction is retried whole; `StorageUnavailable` when the database stays away
        (what was committed stays: the same items again store the rest, the stored ones
        being duplicates)."""
        ...

    async def set_message_ids(
        self, record_id: int, message_ids: Sequence[int | None]
    ) -> StoredRecord:
        """Record the confirmed bubbles of a stored record (one slot per bubble)."""
        ...


class PlatformMessages(Protocol):
    """Real platform messages, what quotes and references resolve against (tools find
    their targets here)."""

    async def find_platform_message(
        self, chat_id: int, message_id: int
    ) -> PlatformMessage | None: ...

    async def record_platform_messages(self, messages: Sequence[PlatformMessage]) -> None:
        """Insert or update (on chat id + message id) platform messages."""
        ...

    async def erase_message(
        self, chat_id: int, message_id: int, *, keep_media: bool = False
    ) -> bool:
        """Forget a message deleted in the chat (docs/context-window.md, Deleted messages).

        In one step: the platform message loses its text and media and leaves the search
        index; every record holding it renders `[deleted]` from then on; a record quoting it
        keeps the relation without the quoted text (`bot.domain.erasure`). `keep_media`:
        only its words go (a member edited them all out of a caption). False when the
        message is not stored."""
        ...


class HistorySearch(Protocol):
    """Full-text search over one chat's platform messages (the `search_history` tool, the
    dashboard)."""

    async def search_messages(
        self, chat_id: int, thread_id: int, query: str, *, limit: int
    ) -> tuple[PlatformMessage, ...]:
        """Messages of this chat and thread (newest text) matching the plain words of
        `query`, best first, at most `limit`; () when nothing matches. Never raises on what
        the query contains."""
        ...


class ChatEventStore(Protocol):
    """What happens to a chat besides its messages: the bot's membership (removed or
    kicked closes its sessions) and the reactions on the bot's messages."""

    async def set_chat_closed(self, chat_id: int, closed: bool) -> int:
        """Mark every session of the chat closed (the bot was removed or kicked) or open
        again; returns how many sessions changed."""
        ...

    async def is_chat_closed(self, chat_id: int) -> bool:
        """True when a session of the chat is marked closed (`ClosedChats` caches it)."""
        ...

    async def record_reactions(self, reactions: Sequence[StoredReaction]) -> None: ...

    async def reactions_since(
        self, chat_id: int, thread_id: int, since: datetime | None, *, limit: int
    ) -> tuple[StoredReaction, ...]:
        """The newest `limit` reactions in the chat's thread after `since` (all when None),
        oldest first."""
        ...

    async def reactions_between(self, start: datetime, end: datetime) -> tuple[StoredReaction, ...]:
        """Every reaction with `start <= created_at < end` (the usage report's days)."""
        ...


class Claims(Protocol):
    """Work done once across every process sharing the database."""

    async def claim_update(self, update_id: int) -> bool:
        """De-duplication of inbound updates: True the first time an update id is claimed,
        False for a duplicate."""
        ...

    async def claim_daily_summary(self, day: date) -> bool:
        """True for the first caller of a day across all processes."""
        ...


class ConversationStore(
    SessionStore, HistoryStore, PlatformMessages, HistorySearch, ChatEventStore, Claims, Protocol
):
    """The whole store, which the composition root opens, wires, prunes and closes."""

    async def prune(
        self, older_than: datetime, *, events_older_than: datetime | None = None
    ) -> object:
        """Retention: apply the policy (see `storage.retention`); returns the counts."""
        ...

    async def close(self) -> None: ...


class MemoryFacts(Protocol):
    """Facts the model keeps on purpose (`remember`), keyed by (chat, member): every read and
    delete names the chat, so no call reaches another chat's facts (`storage.memory_facts`;
    `testkit.memory_facts` in memory; the contract: tests/test_storage/test_memory_facts.py)."""

    async def add_fact(
        self,
        *,
        chat_id: int,
        member_id: int,
        author_id: int,
        text: str,
        created_at: datetime,
        per_member: int,
        per_chat: int,
    ) -> MemoryFact | Literal["per_member", "per_chat"]:
        """Keep a fact unless the member (`per_member`, facts about them in this chat) or the
        chat (`per_chat`, all its facts) is at its cap, checked and written atomically."""
        ...

    async def facts_of(
        self, chat_id: int, member_id: int | None, *, limit: int
    ) -> tuple[MemoryFact, ...]:
        """The chat's facts about `member_id` and about the chat itself (`CHAT_WIDE`; only
        those when `member_id` is None), newest first, at most `limit` of each."""
        ...

    async def find_fact(self, chat_id: int, fact_id: int) -> MemoryFact | None: ...

    async def delete_facts(self, chat_id: int, fact_ids: Collection[int]) -> int:
        """Delete these facts of this chat (ids of other chats are ignored); how many went."""
        ...

    async def delete_member_facts(self, chat_id: int, member_id: int) -> int:
        """Delete every fact about `member_id` in this chat; how many went."""
        ...

    async def list_facts(self, *, chat_id: int | None = None, limit: int) -> tuple[MemoryFact, ...]:
        """Facts for the operator: one chat's (every chat's when None), by chat then newest
        first, at most `limit`."""
        ...

    async def move_chat_facts(self, old_chat_id: int, new_chat_id: int) -> int:
        """A group became a supergroup (a new chat id): its facts follow; how many moved."""
        ...

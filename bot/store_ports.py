"""The store's ports: one Protocol per job, each the size of what its consumer calls.

A consumer that needs several takes the union named after it (`InboundStore`,
`RecoveryStore`, `HistoryStore`, ...). The stores (`storage.sql.SqlStore`,
`testkit.memory_store.InMemoryStore`) implement all of them: `ConversationStore`, which only the
composition root (`bot/app`) takes. `tests/test_architecture.py` checks both: every port a
consumer takes is called whole, and nothing outside `bot/app` names the whole store. The
values the ports carry (`SessionInfo`, `NewRecord`, `PlatformMessage`, ...) are in
`bot.ports`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import date, datetime
from typing import Protocol

from bot.domain.ids import Scene, SessionKey
from bot.domain.records import StoredRecord
from bot.ports import (
    InboundAppend,
    LoadedHistory,
    NewRecord,
    PlatformMessage,
    SessionInfo,
    SessionRequest,
    StoredReaction,
)


class SessionOpener(Protocol):
    async def open_session(
        self, key: SessionKey, *, scene: Scene, title: str | None = None
    ) -> SessionInfo:
        """Get the session for `key`, creating it (or updating scene/title) as needed."""
        ...


class SessionLookup(Protocol):
    async def find_session(self, key: SessionKey) -> SessionInfo | None: ...


class SessionList(Protocol):
    async def list_sessions(self) -> tuple[SessionInfo, ...]: ...


class AwaitingAnswerList(Protocol):
    async def sessions_awaiting_answer(self, since: datetime) -> tuple[SessionInfo, ...]:
        """Open sessions whose active leaf is a member message or tool results stored at or
        after `since` (the turns a crash may have left unanswered), by id; one query."""
        ...


class RouteStore(Protocol):
    """A session's model route (what `/model` switches)."""

    async def set_route(self, session_id: int, route: str | None) -> None: ...


class HistoryLoader(Protocol):
    async def load_history(self, session_id: int, *, max_records: int) -> LoadedHistory:
        """The active path's tail for the window (see `LoadedHistory`)."""
        ...


class PathLoader(Protocol):
    async def load_path(
        self, session_id: int, leaf_id: int | None = None
    ) -> tuple[StoredRecord, ...]:
        """The whole branch root → `leaf_id` (the active leaf by default), with aliases (the
        dashboard's conversation browser pages through it)."""
        ...


class AliasLookup(Protocol):
    async def find_aliases(self, session_id: int, message_ids: Collection[int]) -> dict[int, str]:
        """Aliases of the platform ids in `message_ids` held by records on the active path
        (`m<n>`, or `m<n>.<slot>` for a later bubble), so quotes of messages outside the
        window keep their alias. Records off the active path give none."""
        ...


class SummaryReader(Protocol):
    """Compaction summaries (records of kind `summary`, stored off the active path)."""

    async def find_summaries(
        self, session_id: int, parent_ids: Collection[int]
    ) -> tuple[StoredRecord, ...]:
        """Summary records whose parent is one of `parent_ids`, oldest first."""
        ...


class RecordAppender(Protocol):
    """Adding records to a session's tree."""

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


class BubbleStore(RecordAppender, Protocol):
    """What recording a reply's bubbles needs: append the reply, then fill its slots."""

    async def set_message_ids(
        self, record_id: int, message_ids: Sequence[int | None]
    ) -> StoredRecord:
        """Record the confirmed bubbles of a stored record (one slot per bubble)."""
        ...


class SummaryStore(RecordAppender, SummaryReader, Protocol):
    """What the compactor needs: the summaries found, and a new one stored."""


class ToolResultStore(RecordAppender, AliasLookup, Protocol):
    """What the tool runner needs: its results appended, aliases for the tools."""


class WindowStore(HistoryLoader, AliasLookup, SummaryReader, Protocol):
    """What building a request needs: the window's records, the summaries before it, the
    aliases of what it quotes, and moving the window's start."""

    async def set_window_start(self, session_id: int, record_id: int | None) -> None: ...


class HistoryStore(WindowStore, BubbleStore, Protocol):
    """What the agent runtime needs from a session's records (it hands the parts on)."""


class PlatformMessageLookup(Protocol):
    """Finding a real platform message (tools resolve their targets with it)."""

    async def find_platform_message(
        self, chat_id: int, message_id: int
    ) -> PlatformMessage | None: ...


class PlatformMessageRecorder(Protocol):
    async def record_platform_messages(self, messages: Sequence[PlatformMessage]) -> None:
        """Insert or update (on chat id + message id) platform messages."""
        ...


class PlatformMessageStore(PlatformMessageLookup, PlatformMessageRecorder, Protocol):
    """Real platform messages, what quotes and references resolve against."""


class HistorySearch(Protocol):
    """Full-text search over one chat's platform messages (the `search_history` tool)."""

    async def search_messages(
        self, chat_id: int, thread_id: int, query: str, *, limit: int
    ) -> tuple[PlatformMessage, ...]:
        """Messages of this chat and thread (newest text) matching the plain words of
        `query`, best first, at most `limit`; () when nothing matches. Never raises on what
        the query contains."""
        ...


class MessageEraser(Protocol):
    """Forgetting a message deleted in the chat (docs/context-window.md, Deleted messages)."""

    async def erase_message(
        self, chat_id: int, message_id: int, *, keep_media: bool = False
    ) -> bool:
        """In one step: the platform message loses its text and media and leaves the search
        index; every record holding it renders `[deleted]` from then on; a record quoting it
        keeps the relation without the quoted text (`bot.domain.erasure`). `keep_media`:
        only its words go (a member edited them all out of a caption). False when the
        message is not stored."""
        ...


class UpdateClaims(Protocol):
    """De-duplication of inbound updates."""

    async def claim_update(self, update_id: int) -> bool:
        """True the first time an update id is claimed, False for a duplicate."""
        ...


class DailySummaryClaims(Protocol):
    """The once-a-day claim of the daily summary."""

    async def claim_daily_summary(self, day: date) -> bool:
        """True for the first caller of a day across all processes."""
        ...


class Prunable(Protocol):
    """Retention: drop what the policy no longer keeps."""

    async def prune(
        self, older_than: datetime, *, events_older_than: datetime | None = None
    ) -> object:
        """Apply the retention policy (see `storage.retention`); returns the counts."""
        ...


class InboundBatchStore(Protocol):
    """Group commit of inbound messages (one `getUpdates` batch, one transaction)."""

    async def open_sessions(self, requests: Sequence[SessionRequest]) -> tuple[SessionInfo, ...]:
        """`open_session` for each request, in order (one read when all are known)."""
        ...

    async def append_inbound(
        self, items: Sequence[InboundAppend]
    ) -> tuple[StoredRecord | None, ...]:
        """Store the items in one transaction, in order (each session's records chain in
        item order). An item whose platform message (chat id + message id) is stored, or
        appears earlier in `items`, is a duplicate: not stored, None. An item that cannot
        be stored (bad data) is logged and skipped, None; the others are stored. A failed
        transaction is retried whole; `StorageUnavailable` when the database stays away
        (what was committed stays: the same items again store the rest, the stored ones
        being duplicates)."""
        ...


class ChatEventRecorder(Protocol):
    """The bot's membership of chats and the reactions on its messages, as they happen."""

    async def set_chat_closed(self, chat_id: int, closed: bool) -> int:
        """Mark every session of the chat closed (the bot was removed or kicked) or open
        again; returns how many sessions changed."""
        ...

    async def record_reactions(self, reactions: Sequence[StoredReaction]) -> None: ...


class ClosedLookup(Protocol):
    """Whether the bot was removed from a chat (`ClosedChats` caches the answer)."""

    async def is_chat_closed(self, chat_id: int) -> bool:
        """True when a session of the chat is marked closed."""
        ...


class RecentReactions(Protocol):
    async def reactions_since(
        self, chat_id: int, thread_id: int, since: datetime | None, *, limit: int
    ) -> tuple[StoredReaction, ...]:
        """The newest `limit` reactions in the chat's thread after `since` (all when None),
        oldest first."""
        ...


class ReactionHistory(Protocol):
    async def reactions_between(self, start: datetime, end: datetime) -> tuple[StoredReaction, ...]:
        """Every reaction with `start <= created_at < end` (the usage report's days)."""
        ...


class ActiveLeafStore(SessionLookup, Protocol):
    """What the turn scheduler needs: where a session's conversation ends now (a turn that
    recovery starts runs only if nothing moved it), and moving that end (`/retry`)."""

    async def set_active_leaf(self, session_id: int, record_id: int) -> None: ...


class InboundStore(
    SessionOpener,
    ActiveLeafStore,
    HistoryLoader,
    RecordAppender,
    PlatformMessageStore,
    UpdateClaims,
    InboundBatchStore,
    MessageEraser,
    Protocol,
):
    """What the inbound service needs (it hands `ActiveLeafStore` to its turn scheduler):
    sessions, their history, new records and platform messages, update claims, batches of
    new messages."""


class RecoveryStore(
    SessionList, AwaitingAnswerList, SessionLookup, HistoryLoader, PlatformMessageLookup, Protocol
):
    """What crash recovery reads: every session (or those awaiting an answer), each one's
    tail, the bubbles of a reply."""


class ImportStore(SessionOpener, RecordAppender, Protocol):
    """What importing legacy rows needs: sessions and appends."""


class ConversationStore(
    InboundStore,
    RecoveryStore,
    HistoryStore,
    RouteStore,
    DailySummaryClaims,
    Prunable,
    ChatEventRecorder,
    ClosedLookup,
    RecentReactions,
    ReactionHistory,
    HistorySearch,
    PathLoader,
    MessageEraser,
    Protocol,
):
    """The whole store, which the composition root opens, wires and closes."""

    async def close(self) -> None: ...

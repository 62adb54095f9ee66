"""Write plans: statements out, results in; the steps a plan yields and its SQLAlchemy executor.

A plan is a generator written once, without I/O: it yields `Rows` (a statement whose rows
it reads) and `Run` (a statement run once per parameter set, no result), and receives
each `Rows`' rows (named rows: attribute and index access) as the value of its `yield`;
what it returns is the write's result. Two executors drive the same plans
(docs/architecture.md, One algorithm, two executors):

- `storage.plan_run.run_plan`, on a SQLAlchemy connection in a transaction (PostgreSQL;
  SQLite when its connections are not `storage.sqlite.driver`'s);
- `storage.sqlite.jobs.FastSqlite.write_plan`, as one `sqlite3` job (SQLite's appends and
  inbound batches).

What differs between databases (locking the session rows, new record ids, the platform
messages' upsert and search index) is not in the plans: they take a `SqlParts`, the
database's own sub-plans (`storage.sqlite.parts`, `storage.postgres.parts`).
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from typing import Any, NamedTuple, Protocol, TypeAlias, TypeVar

T = TypeVar("T")


class Rows(NamedTuple):
    """Run `statement` with `params`; the plan receives every row."""

    statement: Any
    params: Mapping[str, Any]


class Run(NamedTuple):
    """Run `statement` once per parameter set in `params` (never empty); no result.

    `statement` may be SQL text (a `str`) with its values written in, run once with no
    parameters (`params` is `({},)`): PostgreSQL's locks, which go with the transaction's
    `BEGIN` in one round trip (`storage.postgres.jobs`)."""

    statement: Any
    params: Sequence[Mapping[str, Any]]


Step: TypeAlias = Rows | Run
Plan: TypeAlias = Generator[Step, Any, T]
"""A plan returning T: yields steps, receives each `Rows`' rows (None after a `Run`)."""


class SqlParts(Protocol):
    """The sub-plans that differ between databases (one implementation per database)."""

    greatest: str
    """The SQL function of the larger of two values (`GREATEST`; SQLite's two-argument `MAX`)."""
    concurrent_writers: bool
    """Whether writers in several processes run at once (PostgreSQL's row locks), or the
    database has one writer at a time (SQLite), which a process may queue for itself."""

    def insert(self, table: Any) -> Any:
        """The database's INSERT into `table`, which knows ON CONFLICT."""
        ...

    def lock_sessions(self, session_ids: Sequence[int]) -> Plan[None]:
        """Hold the write lock of these session rows until the transaction ends."""
        ...

    def lock_chat(self, key: int) -> Plan[None]:
        """Hold the write lock named `key` (`storage.postgres.locks.advisory_key`) until the
        transaction ends: writers of one chat in several processes take turns."""
        ...

    def new_record_ids(self, count: int) -> Plan[list[int]]:
        """`count` ids for records the plan inserts with an explicit id, ascending."""
        ...

    def linked_insert(
        self,
        row: Mapping[str, Any],
        messages: Sequence[Mapping[str, Any]],
        moved: Mapping[str, Any] | None,
    ) -> Rows | None:
        """One statement that inserts the record `row` and returns its id, stores `messages`
        (`storage.codec.platform_message_row`s; one whose `record_id` is None takes the new
        record's) as `store_platform_messages` does, and moves `moved["session_id"]`'s leaf
        to the new record at `moved["now"]` (None: the leaf stays). None: the plan runs
        those steps one by one (a database without round trips to save, or rows the one
        statement does not cover)."""
        ...

    def store_platform_messages(self, rows: Sequence[Mapping[str, Any]]) -> Plan[None]:
        """Insert or update (on chat id + message id) `storage.codec.platform_message_row`s
        and (re-)index their text for search (`storage.search.index_entries`)."""
        ...

    def unindex(self, chat_id: int, message_id: int) -> Plan[None]:
        """Drop one platform message from the search index."""
        ...

    def newest_matching(
        self, chat_id: int, thread_id: int, terms: Sequence[Any], count: int
    ) -> Plan[list[int]]:
        """The event ids of the newest `count` messages of the chat's thread holding every
        term (`storage.search.Term`s), newest first (`storage.search_query.search_plan`)."""
        ...

    def stored_tokens(self, event_ids: Sequence[int]) -> Plan[dict[int, list[str]]]:
        """The indexed tokens of these platform messages, read back (no re-tokenizing)."""
        ...


def first_row(rows: Sequence[Any]) -> Any:
    """The first of a `Rows` step's rows (None without one)."""
    return rows[0] if rows else None

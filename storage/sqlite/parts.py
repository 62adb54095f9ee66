"""SQLite's sub-plans of the record write: no row locks, ids after the largest, FTS5 index."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import func, select, text
from sqlalchemy.dialects import sqlite

from storage.plan import Plan, Rows, Run
from storage.queries import upserting_platform_messages
from storage.search import Term, fts_query, index_entries, scope_token
from storage.tables import MESSAGES, PLATFORM_MESSAGES

# The search index (`storage.search`): an FTS5 table, its rowid the event's id. One statement
# per write, keyed by (chat, message) so no id has to be read first: the answered-load bench
# lost a third of its rate to a select + delete + insert per write.
_PUT = text(
    "INSERT OR REPLACE INTO message_search(rowid, scope, body) "
    "SELECT id, :scope, :body FROM platform_events WHERE chat_id = :chat AND message_id = :mid"
)
_DROP = text(
    "DELETE FROM message_search WHERE rowid = "
    "(SELECT id FROM platform_events WHERE chat_id = :chat AND message_id = :mid)"
)
_MATCH = text(
    "SELECT rowid FROM message_search WHERE message_search MATCH :q ORDER BY rowid DESC LIMIT :n"
)
# FTS5 answers `rowid IN (…)` with a scan of the whole table (38 ms for 500 ids at 1M,
# measured); a join on `json_each` makes it one rowid lookup per id (2 ms).
_TOKENS = text(
    "SELECT m.rowid, m.body FROM json_each(:ids) AS j JOIN message_search AS m ON m.rowid = j.value"
)
_MAX_RECORD_ID = select(func.coalesce(func.max(MESSAGES.c.id), 0))

UPSERT_PLATFORM_MESSAGES = upserting_platform_messages(sqlite.insert(PLATFORM_MESSAGES))


class SqliteParts:
    """`storage.plan.SqlParts` for SQLite."""

    __slots__ = ()
    greatest = "MAX"
    concurrent_writers = False

    def insert(self, table: Any) -> Any:
        """The database's INSERT into `table`, which knows ON CONFLICT."""
        return sqlite.insert(table)

    def lock_sessions(self, session_ids: Sequence[int]) -> Plan[None]:
        """Nothing to run: a write transaction's `BEGIN IMMEDIATE` holds the database's one
        write lock already."""
        return
        yield  # a generator that yields nothing

    def lock_chat(self, key: int) -> Plan[None]:
        """Nothing to run: `BEGIN IMMEDIATE` holds the database's one write lock already."""
        return
        yield  # a generator that yields nothing

    def new_record_ids(self, count: int) -> Plan[list[int]]:
        """After the largest id (the write lock is held: nobody takes them meanwhile)."""
        (row,) = yield Rows(_MAX_RECORD_ID, {})
        top = int(row[0])
        return list(range(top + 1, top + 1 + count))

    def linked_insert(
        self,
        row: Mapping[str, Any],
        messages: Sequence[Mapping[str, Any]],
        moved: Mapping[str, Any] | None,
    ) -> Rows | None:
        """None: statements run in this process, no round trip to save."""
        return None

    def store_platform_messages(self, rows: Sequence[Mapping[str, Any]]) -> Plan[None]:
        yield Run(UPSERT_PLATFORM_MESSAGES, rows)
        put, drop = index_entries(rows)
        if put:
            yield Run(_PUT, [_put_params(row, tokens) for row, tokens in put])
        if drop:
            yield Run(_DROP, drop)

    def unindex(self, chat_id: int, message_id: int) -> Plan[None]:
        yield Run(_DROP, ({"chat": chat_id, "mid": message_id},))

    def newest_matching(
        self, chat_id: int, thread_id: int, terms: Sequence[Term], count: int
    ) -> Plan[list[int]]:
        params = {"q": fts_query(chat_id, thread_id, terms, every=True), "n": count}
        rows = yield Rows(_MATCH, params)
        return [int(row[0]) for row in rows]

    def stored_tokens(self, event_ids: Sequence[int]) -> Plan[dict[int, list[str]]]:
        rows = yield Rows(_TOKENS, {"ids": json.dumps(list(event_ids))})
        return {int(row[0]): str(row[1]).split(" ") for row in rows}


def _put_params(row: Mapping[str, Any], tokens: list[str]) -> dict[str, Any]:
    chat = row["chat_id"]
    scope = scope_token(chat, row["thread_id"])
    return {"chat": chat, "mid": row["message_id"], "scope": scope, "body": " ".join(tokens)}


SQLITE = SqliteParts()

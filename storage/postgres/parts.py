"""PostgreSQL's sub-plans of the record write: `FOR UPDATE`, the id sequence, tsvector index,
and a record inserted, linked and made the leaf in one statement."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    MetaData,
    Table,
    Text,
    bindparam,
    cast,
    func,
    insert,
    select,
    text,
    update,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import ARRAY, TSQUERY, TSVECTOR

from storage.plan import Plan, Rows, Run
from storage.queries import upserting_platform_messages
from storage.search import Term, index_entries, ts_query
from storage.tables import MESSAGES, PLATFORM_MESSAGES, SESSIONS

SEARCH = Table(
    "message_search",
    MetaData(),
    Column("event_id", BigInteger, primary_key=True),
    Column("chat_id", BigInteger, nullable=False),
    Column("thread_id", BigInteger, nullable=False),
    Column("terms", TSVECTOR, nullable=False),
)
"""The search index (`storage.search`): a tsvector per event, GIN-indexed (migration 0003)."""
_PUT = text(
    "INSERT INTO message_search (event_id, chat_id, thread_id, terms) "
    "SELECT id, chat_id, thread_id, array_to_tsvector(:tokens) FROM platform_events "
    "WHERE chat_id = :chat AND message_id = :mid "
    "ON CONFLICT (event_id) DO UPDATE SET terms = excluded.terms, thread_id = excluded.thread_id"
).bindparams(bindparam("tokens", type_=ARRAY(Text)))
_DROP = text(
    "DELETE FROM message_search WHERE event_id = "
    "(SELECT id FROM platform_events WHERE chat_id = :chat AND message_id = :mid)"
)
_MATCH = (
    select(SEARCH.c.event_id)
    .where(
        SEARCH.c.chat_id == bindparam("chat"),
        SEARCH.c.thread_id == bindparam("thread"),
        SEARCH.c.terms.op("@@")(cast(bindparam("q", type_=Text), TSQUERY)),
    )
    .order_by(SEARCH.c.event_id.desc())
    .limit(bindparam("n"))
)
# `= ANY(array)`, not an expanding `IN`: one SQL text whatever the count (prepared once)
_TOKENS = select(
    SEARCH.c.event_id, func.array_to_string(func.tsvector_to_array(SEARCH.c.terms), " ")
).where(SEARCH.c.event_id == func.any(bindparam("ids", type_=ARRAY(BigInteger))))
_LOCK_SESSIONS = "SELECT id FROM chat_sessions WHERE id IN ({ids}) ORDER BY id FOR UPDATE"
_LOCK_CHAT = "SELECT pg_advisory_xact_lock({key})"
_RECORD_IDS = text(
    "SELECT nextval(pg_get_serial_sequence('agent_messages', 'id')) FROM generate_series(1, :n)"
)

UPSERT_PLATFORM_MESSAGES = upserting_platform_messages(postgresql.insert(PLATFORM_MESSAGES))
_UPSERT_INDEXED: dict[tuple[str, ...], Any] = {}


def upsert_indexed(keys: tuple[str, ...]) -> Any:
    """One statement (one round trip) that upserts a platform message with the columns
    `keys` and puts its `tokens` in the search index: the upsert is a CTE whose row feeds
    the index's insert. Made once per set of columns."""
    known = _UPSERT_INDEXED.get(keys)
    if known is None:
        values = {key: bindparam(key, type_=PLATFORM_MESSAGES.c[key].type) for key in keys}
        known = _UPSERT_INDEXED[keys] = _indexing(_upserting(values), "tokens")
    return known


def _upserting(values: dict[str, Any]) -> Any:
    """A CTE that upserts one platform message with `values`: its id, chat and thread."""
    return (
        UPSERT_PLATFORM_MESSAGES.values(values)
        .returning(
            PLATFORM_MESSAGES.c.id, PLATFORM_MESSAGES.c.chat_id, PLATFORM_MESSAGES.c.thread_id
        )
        .cte("upserted")
    )


def _indexing(upserted: Any, tokens: str) -> Any:
    """The index's upsert of the `upserted` CTE's message with the parameter `tokens`."""
    terms = func.array_to_tsvector(bindparam(tokens, type_=ARRAY(Text)))
    indexed = postgresql.insert(SEARCH).from_select(
        ["event_id", "chat_id", "thread_id", "terms"],
        select(upserted.c.id, upserted.c.chat_id, upserted.c.thread_id, terms),
    )
    return indexed.on_conflict_do_update(
        index_elements=["event_id"],
        set_={"terms": indexed.excluded.terms, "thread_id": indexed.excluded.thread_id},
    )


_LINKED: dict[tuple[tuple[str, ...], tuple[str, ...] | None, bool], Any] = {}


def linked_insert(
    record_keys: tuple[str, ...], message_keys: tuple[str, ...] | None, move: bool
) -> Any:
    """One statement (one round trip) that inserts a record with the columns `record_keys`
    (parameters `r_<column>`) and selects its id; with `message_keys`, upserts one platform
    message with those columns (`m_<column>`; a `m_record_id` of NULL takes the new
    record's id) and puts its `m_tokens` in the search index (`upsert_indexed`); with
    `move`, sets the leaf of session `leaf_session` to the new record at `leaf_now`. Each
    write is a CTE: they run together, and each sees only the rows of the CTEs it reads
    (the foreign keys to the new record are checked as the statement ends). The prefixes
    keep a parameter from naming a column of another CTE's table (SQLAlchemy would add it
    to that write). Made once per shape."""
    shape = (record_keys, message_keys, move)
    known = _LINKED.get(shape)
    if known is None:
        values = {key: bindparam(f"r_{key}", type_=MESSAGES.c[key].type) for key in record_keys}
        inserted = insert(MESSAGES).values(values).returning(MESSAGES.c.id).cte("inserted")
        new_id = select(inserted.c.id).scalar_subquery()
        known = select(inserted.c.id)
        if message_keys is not None:
            columns: dict[str, Any] = {
                key: bindparam(f"m_{key}", type_=PLATFORM_MESSAGES.c[key].type)
                for key in message_keys
            }
            columns["record_id"] = func.coalesce(bindparam("m_record_id", type_=BigInteger), new_id)
            indexing = _indexing(_upserting(columns), "m_tokens")
            known = known.add_cte(indexing.returning(SEARCH.c.event_id).cte("indexed"))
        if move:
            moving = (
                update(SESSIONS)
                .where(SESSIONS.c.id == bindparam("leaf_session", type_=BigInteger))
                .values(
                    active_leaf_id=new_id,
                    updated_at=bindparam("leaf_now", type_=SESSIONS.c.updated_at.type),
                )
                .returning(SESSIONS.c.id)
            )
            known = known.add_cte(moving.cte("moved"))
        _LINKED[shape] = known
    return known


class PostgresParts:
    """`storage.plan.SqlParts` for PostgreSQL."""

    __slots__ = ()
    greatest = "GREATEST"
    concurrent_writers = True

    def insert(self, table: Any) -> Any:
        """The database's INSERT into `table`, which knows ON CONFLICT."""
        return postgresql.insert(table)

    def lock_sessions(self, session_ids: Sequence[int]) -> Plan[None]:
        """`FOR UPDATE` on the rows, in id order (two writers never wait on each other).
        The ids are written into the SQL (integers: nothing to quote), so the lock, a
        transaction's first statement, travels with its `BEGIN` in one round trip
        (`storage.postgres.jobs`)."""
        if session_ids:
            ids = ", ".join(str(int(session_id)) for session_id in sorted(set(session_ids)))
            yield Run(_LOCK_SESSIONS.format(ids=ids), ({},))

    def lock_chat(self, key: int) -> Plan[None]:
        """A transaction-scoped advisory lock (with the `BEGIN`, as `lock_sessions`)."""
        yield Run(_LOCK_CHAT.format(key=int(key)), ({},))

    def new_record_ids(self, count: int) -> Plan[list[int]]:
        """From the table's sequence."""
        rows = yield Rows(_RECORD_IDS, {"n": count})
        return [int(row[0]) for row in rows]

    def linked_insert(
        self,
        row: Mapping[str, Any],
        messages: Sequence[Mapping[str, Any]],
        moved: Mapping[str, Any] | None,
    ) -> Rows | None:
        """One statement (`linked_insert`) for a record with at most one platform message,
        one with words to index; else None (a message without words leaves the index by
        its own statement, several messages are upserted together)."""
        params: dict[str, Any] = {f"r_{key}": value for key, value in row.items()}
        message_keys = None
        if messages:
            put, _drop = index_entries(messages)
            if len(messages) > 1 or not put:
                return None
            message, tokens = put[0]
            message_keys = tuple(key for key in message if key != "record_id")
            params.update({f"m_{key}": value for key, value in message.items()})
            params["m_tokens"] = sorted(set(tokens))
        if moved is not None:
            params.update(leaf_session=moved["session_id"], leaf_now=moved["now"])
        statement = linked_insert(tuple(row), message_keys, moved is not None)
        return Rows(statement, params)

    def store_platform_messages(self, rows: Sequence[Mapping[str, Any]]) -> Plan[None]:
        """A message with words to index is upserted and indexed by one statement
        (`upsert_indexed`); the others are upserted, and dropped from the index."""
        put, drop = index_entries(rows)
        indexed = {id(row) for row, _tokens in put}
        if put:
            keys = tuple(put[0][0])
            if all(tuple(row) == keys for row, _tokens in put):
                params = [{**row, "tokens": sorted(set(tokens))} for row, tokens in put]
                yield Run(upsert_indexed(keys), params)
            else:  # rows of several shapes (not made by `platform_message_row`)
                indexed = set()
        plain = [row for row in rows if id(row) not in indexed]
        if plain:
            yield Run(UPSERT_PLATFORM_MESSAGES, plain)
        if put and not indexed:
            put_params = [
                {"chat": row["chat_id"], "mid": row["message_id"], "tokens": sorted(set(tokens))}
                for row, tokens in put
            ]
            yield Run(_PUT, put_params)
        if drop:
            yield Run(_DROP, drop)

    def unindex(self, chat_id: int, message_id: int) -> Plan[None]:
        yield Run(_DROP, ({"chat": chat_id, "mid": message_id},))

    def newest_matching(
        self, chat_id: int, thread_id: int, terms: Sequence[Term], count: int
    ) -> Plan[list[int]]:
        query = ts_query(terms, every=True)
        params = {"chat": chat_id, "thread": thread_id, "q": query, "n": count}
        rows = yield Rows(_MATCH, params)
        return [int(row[0]) for row in rows]

    def stored_tokens(self, event_ids: Sequence[int]) -> Plan[dict[int, list[str]]]:
        rows = yield Rows(_TOKENS, {"ids": list(event_ids)})
        return {int(row[0]): str(row[1]).split(" ") for row in rows}


POSTGRES = PostgresParts()

"""Full-text search over a chat's platform messages: the index, its upkeep, and the query.

What is indexed: every platform message (`platform_events`: what members said and the bot's
confirmed bubbles), its newest text, keyed by the event's row id. One tokenizer, written
here in Python, serves every store, so SQLite, PostgreSQL and the in-memory store find the
same messages:

- a run of letters, digits and marks that is not `Lo` (Latin, Cyrillic, Greek…) is one
  lower-cased token (at most `MAX_TOKEN_CHARS`);
- a run of `Lo` letters (Han, kana, Hangul, Thai: scripts written without spaces between
  words) becomes its overlapping bigrams plus its last character alone, so every character
  starts a token: `wifi密码是` → `wifi`, `密码`, `码是`, `是`.

A query takes the same path (cut to `MAX_QUERY_CHARS` first, at most `MAX_TERMS` terms):
a word of four or more characters matches as a prefix (`pass` finds `password`; a
shorter one only itself: `the`* would expand to thousands of words), a CJK
run of two or more characters as its bigrams, a single CJK character as a prefix. Nothing
in a query is an operator: every term is quoted for the engine, and a query of only
punctuation has no terms (no match, never a syntax error).

Ranking: by the number of distinct query terms a message holds, then newest first (the
memory store ranks every message so). The SQL stores read the newest messages holding every
term straight from the index in row order and, when those are fewer than asked, rank the
newest `PER_TERM_CANDIDATES` holders of each of the first `PER_TERM_QUERIES` terms by the
tokens stored in the index. No relevance score over every match: bm25 over half a million
matches of a common word cost ~150 ms at 1M messages (measured). An older message holding
only some of the terms can be missed when more than `PER_TERM_CANDIDATES` newer ones hold
each of its terms.

Storage. SQLite: an FTS5 table `message_search(scope, body)` with the `ascii` tokenizer over
the pre-tokenized body (the `scope` column holds one token per chat and thread), its rowid
the event id; a trigger drops the entry when the event is deleted (retention).
PostgreSQL: a table `message_search(event_id → platform_events ON DELETE CASCADE, chat_id,
thread_id, terms tsvector)` with a GIN index; the tsvector is built from the token array
(`array_to_tsvector`), so the server's parser and locale play no part. Built in: no
extension to create (`pg_trgm`, in Debian's contrib, needs `CREATE EXTENSION` and, like
FTS5's trigram, cannot use its index for a two-character word). The writers of
platform messages call `index_platform_messages` in the same transaction (edits re-index the newest
text); a message deleted in the chat leaves at once (`unindex_platform_message`, in the
transaction that erases it: `storage.erase`); migration 0003 builds the index for existing
databases.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
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
    select,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, TSQUERY, TSVECTOR
from sqlalchemy.ext.asyncio import AsyncConnection

from storage.tables import PLATFORM_MESSAGES

MAX_QUERY_CHARS = 256
"""A longer query is cut to its first 256 characters."""
MAX_TERMS = 24
MAX_TOKEN_CHARS = 64
PER_TERM_QUERIES = 8
PER_TERM_CANDIDATES = 75
_PREFIX_MIN = 4
_MAX_UNIT_CHARS = 8
"""A character and at most 7 marks: a CJK token stays far under PostgreSQL's 2 KB lexeme."""

SEARCH_TABLE = "message_search"
"""The index's table (SQLite: with FTS5's shadow tables `message_search_*`)."""


def outside_the_search_index(name: str | None, kind: str, _parent: object) -> bool:
    """An Alembic `include_name` filter: schema comparisons leave the index alone (this
    module owns it, outside the models)."""
    return not (kind in ("table", "index") and str(name).startswith(SEARCH_TABLE))


_SEARCH_META = MetaData()
PG_SEARCH = Table(
    "message_search",
    _SEARCH_META,
    Column("event_id", BigInteger, primary_key=True),
    Column("chat_id", BigInteger, nullable=False),
    Column("thread_id", BigInteger, nullable=False),
    Column("terms", TSVECTOR, nullable=False),
)
"""The PostgreSQL index table (SQLite's is the FTS5 table of migration 0003)."""


@dataclass(frozen=True, slots=True)
class Term:
    text: str
    prefix: bool


# ---------------------------------------------------------------- tokenizer


def _runs(text_: str) -> Iterable[tuple[bool, list[str]]]:
    """Runs of (is_cjk, units): a unit is one character with the marks that follow it."""
    cjk = False
    units: list[str] = []
    for ch in text_:
        category = unicodedata.category(ch)
        if category[0] == "M":
            if units and len(units[-1]) < _MAX_UNIT_CHARS:  # a pile of marks stays bounded
                units[-1] += ch
            continue
        if category == "Lo":
            kind: bool | None = True
        elif category[0] in "LN":
            kind = False
        else:
            kind = None
        if units and kind is not cjk:
            yield cjk, units
            units = []
        if kind is not None:
            cjk = kind
            units.append(ch)
    if units:
        yield cjk, units


def index_tokens(text_: str) -> list[str]:
    """The tokens `text_` is indexed under (module docstring), in order, with repeats."""
    tokens: list[str] = []
    for cjk, units in _runs(text_):
        if cjk:
            tokens.extend(units[i] + units[i + 1] for i in range(len(units) - 1))
            tokens.append(units[-1])
        else:
            tokens.append("".join(units).lower()[:MAX_TOKEN_CHARS])
    return tokens


def query_terms(query: str) -> tuple[Term, ...]:
    """The terms of a plain-words query (module docstring); () when it has none."""
    terms: dict[str, Term] = {}
    for cjk, units in _runs(query[:MAX_QUERY_CHARS]):
        if cjk and len(units) > 1:
            found = [Term(units[i] + units[i + 1], False) for i in range(len(units) - 1)]
        elif cjk:
            found = [Term(units[0], True)]
        else:
            word = "".join(units).lower()[:MAX_TOKEN_CHARS]
            found = [Term(word, len(word) >= _PREFIX_MIN)]
        for term in found:
            terms.setdefault(term.text, term)
    return tuple(terms.values())[:MAX_TERMS]


def matched_terms(terms: Sequence[Term], tokens: Iterable[str]) -> int:
    """How many of `terms` the document with `tokens` contains."""
    have = set(tokens)
    return sum(
        1
        for term in terms
        if term.text in have or (term.prefix and any(t.startswith(term.text) for t in have))
    )


def scope_token(chat_id: int, thread_id: int) -> str:
    """One `ascii`-tokenizer token naming a chat and thread (`-100…` → `cn100…t0`)."""
    return f"c{chat_id}t{thread_id}".replace("-", "n")


def fts_query(chat_id: int, thread_id: int, terms: Sequence[Term], *, every: bool) -> str:
    """The FTS5 MATCH string for messages holding every term (or any); every term quoted
    (a term holds no quote: letters, digits and marks only)."""
    joiner = " AND " if every else " OR "
    alternatives = joiner.join(f'"{t.text}"' + ("*" if t.prefix else "") for t in terms)
    return f'scope:"{scope_token(chat_id, thread_id)}" AND body:({alternatives})'


def ts_query(terms: Sequence[Term], *, every: bool) -> str:
    """The tsquery text; lexemes quoted (they hold letters, digits and marks only)."""
    joiner = " & " if every else " | "
    return joiner.join(f"'{t.text}'" + (":*" if t.prefix else "") for t in terms)


# ---------------------------------------------------------------- upkeep

# One statement per write, keyed by (chat, message) so no id has to be read first: the
# answered-load bench lost a third of its rate to a select + delete + insert per write.
SQLITE_PUT = text(
    "INSERT OR REPLACE INTO message_search(rowid, scope, body) "
    "SELECT id, :scope, :body FROM platform_events WHERE chat_id = :chat AND message_id = :mid"
)
SQLITE_DROP = text(
    "DELETE FROM message_search WHERE rowid = "
    "(SELECT id FROM platform_events WHERE chat_id = :chat AND message_id = :mid)"
)
PG_PUT = text(
    "INSERT INTO message_search (event_id, chat_id, thread_id, terms) "
    "SELECT id, chat_id, thread_id, array_to_tsvector(:tokens) FROM platform_events "
    "WHERE chat_id = :chat AND message_id = :mid "
    "ON CONFLICT (event_id) DO UPDATE SET terms = excluded.terms, thread_id = excluded.thread_id"
).bindparams(bindparam("tokens", type_=ARRAY(Text)))
PG_DROP = text(
    "DELETE FROM message_search WHERE event_id = "
    "(SELECT id FROM platform_events WHERE chat_id = :chat AND message_id = :mid)"
)


def index_params(
    messages: Iterable[tuple[int, int, int, str]], *, postgres: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The parameters of `index_platform_messages`' statements: rows to (re-)index, and
    rows to drop from the index (an event without words)."""
    put: list[dict[str, Any]] = []
    drop: list[dict[str, Any]] = []
    for chat, thread, message_id, body in messages:
        tokens = index_tokens(body)
        key = {"chat": chat, "mid": message_id}
        if not tokens:
            drop.append(key)
        elif postgres:
            put.append({**key, "tokens": sorted(set(tokens))})
        else:
            put.append({**key, "scope": scope_token(chat, thread), "body": " ".join(tokens)})
    return put, drop


async def index_platform_messages(
    conn: AsyncConnection, messages: Iterable[tuple[int, int, int, str]]
) -> None:
    """(Re-)index platform messages just written, as (chat id, thread id, message id, text):
    the text is what the row now holds (the newest version of an edit); an event without
    words leaves the index."""
    postgres = conn.dialect.name == "postgresql"
    put, drop = index_params(messages, postgres=postgres)
    if put:
        await conn.execute(PG_PUT if postgres else SQLITE_PUT, put)
    if drop:
        await conn.execute(PG_DROP if postgres else SQLITE_DROP, drop)


async def unindex_platform_message(conn: AsyncConnection, chat_id: int, message_id: int) -> None:
    """Drop one platform message from the index (it was deleted in the chat)."""
    postgres = conn.dialect.name == "postgresql"
    await conn.execute(PG_DROP if postgres else SQLITE_DROP, {"chat": chat_id, "mid": message_id})


# ---------------------------------------------------------------- query

_SQLITE_MATCH = text(
    "SELECT rowid FROM message_search WHERE message_search MATCH :q ORDER BY rowid DESC LIMIT :n"
)
_PG_QUERY = cast(bindparam("q", type_=Text), TSQUERY)
_PG_MATCH = (
    select(PG_SEARCH.c.event_id)
    .where(
        PG_SEARCH.c.chat_id == bindparam("chat"),
        PG_SEARCH.c.thread_id == bindparam("thread"),
        PG_SEARCH.c.terms.op("@@")(_PG_QUERY),
    )
    .order_by(PG_SEARCH.c.event_id.desc())
    .limit(bindparam("n"))
)


async def search_platform_message_rows(
    conn: AsyncConnection, chat_id: int, thread_id: int, query: str, *, limit: int
) -> list[Any]:
    """Event rows of this chat and thread matching `query`, best first (at most `limit`)."""
    terms = query_terms(query)
    if not terms or limit <= 0:
        return []
    postgres = conn.dialect.name == "postgresql"

    async def newest(of: Sequence[Term], count: int) -> list[int]:
        """The newest `count` messages holding every term of `of`."""
        if postgres:
            query_text = ts_query(of, every=True)
            params = {"chat": chat_id, "thread": thread_id, "q": query_text, "n": count}
            return list((await conn.execute(_PG_MATCH, params)).scalars())
        params = {"q": fts_query(chat_id, thread_id, of, every=True), "n": count}
        return list((await conn.execute(_SQLITE_MATCH, params)).scalars())

    # Holding every term is the best score: those come newest first, straight from the index.
    chosen = await newest(terms, limit) if len(terms) > 1 else []
    if len(chosen) < limit:
        # then the newest holders of each term on its own, so a rare term's few messages are
        # not crowded out by a common one's many
        seen = set(chosen)
        partial: list[int] = []
        for term in terms[:PER_TERM_QUERIES]:
            for event_id in await newest((term,), PER_TERM_CANDIDATES):
                if event_id not in seen:
                    seen.add(event_id)
                    partial.append(event_id)
        scored = sorted(
            (
                (matched_terms(terms, tokens), event_id)
                for event_id, tokens in (await _stored_tokens(conn, partial)).items()
            ),
            reverse=True,
        )
        chosen += [event_id for score, event_id in scored if score][: limit - len(chosen)]
    if not chosen:
        return []
    # by id alone: with `chat_id = …` too, SQLite walks the chat's whole (chat, message)
    # index instead of looking the ids up (40 ms in a chat of 500k messages, measured)
    rows = (
        await conn.execute(select(PLATFORM_MESSAGES).where(PLATFORM_MESSAGES.c.id.in_(chosen)))
    ).all()
    by_id = {row.id: row for row in rows if (row.chat_id, row.thread_id) == (chat_id, thread_id)}
    return [by_id[event_id] for event_id in chosen if event_id in by_id]


# FTS5 answers `rowid IN (…)` with a scan of the whole table (38 ms for 500 ids at 1M,
# measured); a join on `json_each` makes it one rowid lookup per id (2 ms).
_SQLITE_TOKENS = text(
    "SELECT m.rowid, m.body FROM json_each(:ids) AS j JOIN message_search AS m ON m.rowid = j.value"
)
_PG_TOKENS = select(
    PG_SEARCH.c.event_id, func.array_to_string(func.tsvector_to_array(PG_SEARCH.c.terms), " ")
).where(PG_SEARCH.c.event_id.in_(bindparam("ids", expanding=True)))


async def _stored_tokens(conn: AsyncConnection, ids: Sequence[int]) -> dict[int, list[str]]:
    """The indexed tokens of these platform messages, read back (no re-tokenizing)."""
    if not ids:
        return {}
    if conn.dialect.name == "postgresql":
        rows = (await conn.execute(_PG_TOKENS, {"ids": list(ids)})).all()
    else:
        rows = (await conn.execute(_SQLITE_TOKENS, {"ids": json.dumps(list(ids))})).all()
    return {int(row[0]): str(row[1]).split(" ") for row in rows}

"""Full-text search over a chat's platform messages: the index and its upkeep.

What is indexed: every platform message (`platform_events`: what members said and the bot's
confirmed bubbles), its newest text, keyed by the event's row id. One tokenizer, written
here in Python, serves every store, so SQLite, PostgreSQL and the in-memory store find the
same messages:

- a run of letters, digits and marks that is not `Lo` (Latin, Cyrillic, Greek…) is one
  lower-cased token (at most `MAX_TOKEN_CHARS`);
- a run of `Lo` letters (Han, kana, Hangul, Thai: scripts written without spaces between
  words) becomes its overlapping bigrams plus its last character alone, so every character
  starts a token: `wifi密码是` → `wifi`, `密码`, `码是`, `是`.

A query takes the same path (`storage.search_query`: its terms, ranking and plan).

Storage. SQLite: an FTS5 table `message_search(scope, body)` with the `ascii` tokenizer over
the pre-tokenized body (the `scope` column holds one token per chat and thread), its rowid
the event id; a trigger drops the entry when the event is deleted (retention). PostgreSQL: a
table `message_search(event_id → platform_events ON DELETE CASCADE, chat_id, thread_id,
terms tsvector)` with a GIN index; the tsvector is built from the token array
(`array_to_tsvector`), so the server's parser and locale play no part. Built in: no
extension to create (`pg_trgm`, in Debian's contrib, needs `CREATE EXTENSION` and, like
FTS5's trigram, cannot use its index for a two-character word). The writers of platform
messages index them in the same transaction (`SqlParts.store_platform_messages`, from
`index_entries`; edits re-index the newest text); a message deleted in the chat leaves at
once (`SqlParts.unindex`, in the transaction that erases it: `storage.erase`); migration
0003 builds the index for existing databases. The SQL of each database is in
`storage.sqlite.parts` and `storage.postgres.parts`; the query's algorithm is
`storage.search_query.search_plan`.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MAX_TOKEN_CHARS = 64
_MAX_UNIT_CHARS = 8
"""A character and at most 7 marks: a CJK token stays far under PostgreSQL's 2 KB lexeme."""

SEARCH_TABLE = "message_search"
"""The index's table (SQLite: with FTS5's shadow tables `message_search_*`)."""


def outside_the_search_index(name: str | None, kind: str, _parent: object) -> bool:
    """An Alembic `include_name` filter: schema comparisons leave the index alone (this
    module owns it, outside the models)."""
    return not (kind in ("table", "index") and str(name).startswith(SEARCH_TABLE))


@dataclass(frozen=True, slots=True)
class Term:
    text: str
    prefix: bool


# ---------------------------------------------------------------- tokenizer


def runs(text_: str) -> Iterable[tuple[bool, list[str]]]:
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
    for cjk, units in runs(text_):
        if cjk:
            tokens.extend(units[i] + units[i + 1] for i in range(len(units) - 1))
            tokens.append(units[-1])
        else:
            tokens.append("".join(units).lower()[:MAX_TOKEN_CHARS])
    return tokens


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


def index_entries(
    rows: Iterable[Mapping[str, Any]],
) -> tuple[list[tuple[Mapping[str, Any], list[str]]], list[dict[str, Any]]]:
    """What indexing platform message rows (`storage.codec.platform_message_row`: the text
    each now holds, the newest version of an edit) takes: (row, tokens) to (re-)index, and
    the keys (`chat`, `mid`) of rows without words, which leave the index. Each database
    writes them its own way (`SqlParts.store_platform_messages`)."""
    put: list[tuple[Mapping[str, Any], list[str]]] = []
    drop: list[dict[str, Any]] = []
    for row in rows:
        tokens = index_tokens(row["text"])
        if tokens:
            put.append((row, tokens))
        else:
            drop.append({"chat": row["chat_id"], "mid": row["message_id"]})
    return put, drop

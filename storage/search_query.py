"""A full-text query over a chat's platform messages: its terms (`query_terms`), how a
message matches them (`matched_terms`) and the plan that finds the best (`search_plan`),
over the index `storage.search` keeps.

A query is tokenized as the index is (cut to `MAX_QUERY_CHARS` first, at most `MAX_TERMS`
terms): a word of four or more characters matches as a prefix (`pass` finds `password`; a
shorter one only itself: `the`* would expand to thousands of words), a CJK run of two or
more characters as its bigrams, a single CJK character as a prefix. Nothing in a query is an
operator: every term is quoted for the engine, and a query of only punctuation has no terms
(no match, never a syntax error).

Ranking: by the number of distinct query terms a message holds, then newest first (the
memory store ranks every message so). The SQL stores read the newest messages holding every
term straight from the index in row order and, when those are fewer than asked, rank the
newest `PER_TERM_CANDIDATES` holders of each of the first `PER_TERM_QUERIES` terms by the
tokens stored in the index. No relevance score over every match: bm25 over half a million
matches of a common word cost ~150 ms at 1M messages (measured). An older message holding
only some of the terms can be missed when more than `PER_TERM_CANDIDATES` newer ones hold
each of its terms.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import bindparam, select

from storage.plan import Plan, Rows, SqlParts
from storage.search import MAX_TOKEN_CHARS, Term, runs
from storage.tables import PLATFORM_MESSAGES

MAX_QUERY_CHARS = 256
"""A longer query is cut to its first 256 characters."""
MAX_TERMS = 24
PER_TERM_QUERIES = 8
PER_TERM_CANDIDATES = 75
_PREFIX_MIN = 4


def query_terms(query: str) -> tuple[Term, ...]:
    """The terms of a plain-words query (module docstring); () when it has none."""
    terms: dict[str, Term] = {}
    for cjk, units in runs(query[:MAX_QUERY_CHARS]):
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


def search_plan(
    parts: SqlParts, chat_id: int, thread_id: int, query: str, *, limit: int
) -> Plan[list[Any]]:
    """Event rows of this chat and thread matching `query`, best first (at most `limit`),
    read by the database's `newest_matching` and `stored_tokens` (`storage.plan`)."""
    terms = query_terms(query)
    if not terms or limit <= 0:
        return []
    # Holding every term is the best score: those come newest first, straight from the index.
    chosen: list[int] = []
    if len(terms) > 1:
        chosen = yield from parts.newest_matching(chat_id, thread_id, terms, limit)
    if len(chosen) < limit:
        # then the newest holders of each term on its own, so a rare term's few messages are
        # not crowded out by a common one's many
        seen = set(chosen)
        partial: list[int] = []
        for term in terms[:PER_TERM_QUERIES]:
            found = yield from parts.newest_matching(
                chat_id, thread_id, (term,), PER_TERM_CANDIDATES
            )
            for event_id in found:
                if event_id not in seen:
                    seen.add(event_id)
                    partial.append(event_id)
        stored = (yield from parts.stored_tokens(partial)) if partial else {}
        scored = sorted(
            ((matched_terms(terms, tokens), event_id) for event_id, tokens in stored.items()),
            reverse=True,
        )
        chosen += [event_id for score, event_id in scored if score][: limit - len(chosen)]
    if not chosen:
        return []
    # by id alone: with `chat_id = …` too, SQLite walks the chat's whole (chat, message)
    # index instead of looking the ids up (40 ms in a chat of 500k messages, measured)
    rows = yield Rows(_EVENTS, {"ids": chosen})
    by_id = {row.id: row for row in rows if (row.chat_id, row.thread_id) == (chat_id, thread_id)}
    return [by_id[event_id] for event_id in chosen if event_id in by_id]


_EVENTS = select(PLATFORM_MESSAGES).where(
    PLATFORM_MESSAGES.c.id.in_(bindparam("ids", expanding=True))
)

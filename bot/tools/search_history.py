"""search_history: full-text search over the whole history of the turn's chat and thread.

The store searches only the turn's chat and thread (`ToolContext.chat_id` / `thread_id`,
never an argument), so no query reaches another chat. The query is plain words: the store
quotes every term, so operators, quotes or only punctuation are never a syntax error; a
query longer than `MAX_QUERY_CHARS` is cut to its first `MAX_QUERY_CHARS` characters.

The message the turn answers is left out (it holds the question's words, not the answer).
One line per hit, best first:
`[quote id:m12;user:Alice;date:2026-11-02;time:14:03;] the text, on one line…`
The id is the message's alias on the active path (it joins the turn's alias table, so every
tool accepts it). A message without one — pruned from the record tree, or on an abandoned
branch (an edited trigger's old answer) — shows its platform id, which
`inspect_conversation_reference` accepts (registered as a quoted reference); the other
tools act only on messages the turn showed by alias.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.context.escaping import escape_every_bracket, header_value
from bot.context.headers import local_day, local_hhmm
from bot.context.projection import current_record_index
from bot.domain.platform_messages import PlatformMessage
from bot.errors import ToolError
from bot.ports import ToolSpec
from bot.tools.base import Tool, ToolContext

MAX_QUERY_CHARS = 256
"""Mirrors `storage.search_query.MAX_QUERY_CHARS`: longer queries are cut to this many."""
MAX_LIMIT = 20
DEFAULT_LIMIT = 5
MAX_TEXT_CHARS = 300
"""Each hit's text on its line; inspect_conversation_reference reads it in full."""


def _limit(args: Mapping[str, Any]) -> int:
    value = args.get("limit", DEFAULT_LIMIT)
    if value is None:
        return DEFAULT_LIMIT
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise ToolError(f"limit must be an integer from 1 to {MAX_LIMIT}", code="bad_arguments")
    return max(1, min(MAX_LIMIT, int(value)))


def render_hit(message: PlatformMessage, shown_id: str, ctx: ToolContext) -> str:
    """One result line: the quote-line fields, then the text on one line, escaped."""
    name = message.sender_name or (ctx.bot_name if message.is_bot else "")
    who = f"user:{header_value(name)};" if name else ""
    if message.sender_id is not None and not message.is_bot:
        who += f"user_id:{message.sender_id};"
    fields = (
        f"id:{header_value(shown_id)};{who}"
        f"date:{local_day(message.date, ctx.zone).isoformat()};"
        f"time:{local_hhmm(message.date, ctx.zone)};"
    )
    body = " ".join(message.text.split())
    if len(body) > MAX_TEXT_CHARS:
        body = body[:MAX_TEXT_CHARS] + "…"
    # one line of member text after our fields: every bracket (and look-alike) escaped, not
    # only a line's first, so no part of it can pass for one of our markers
    return f"[quote {fields}] " + escape_every_bracket(body)


def _current_message_ids(ctx: ToolContext) -> frozenset[int]:
    """The message the turn answers: it holds the question's words, not the answer."""
    index = current_record_index(ctx.records)
    if index is None:
        return frozenset()
    return frozenset(mid for mid in ctx.records[index].message_ids if mid is not None)


async def search_history(args: Mapping[str, Any], ctx: ToolContext) -> str:
    query = args.get("query")
    if not isinstance(query, str):
        raise ToolError("argument 'query' must be a string of words", code="bad_arguments")
    query = query[:MAX_QUERY_CHARS]
    if not query.strip():
        raise ToolError("argument 'query' is empty: give the words to look for", "bad_arguments")
    limit = _limit(args)
    if ctx.search is None:
        raise ToolError("history search is not available here", code="unavailable")
    asking = _current_message_ids(ctx)
    found = await ctx.search.search_messages(
        ctx.chat_id, ctx.thread_id, query, limit=limit + len(asking)
    )
    hits = [hit for hit in found if hit.message_id not in asking][:limit]
    if not hits:
        return f"no message in this chat's history matches {query!r}"
    ids = [hit.message_id for hit in hits]
    aliases = {} if ctx.history is None else await ctx.history.find_aliases(ctx.session_id, ids)
    lines = []
    for hit in hits:
        alias = aliases.get(hit.message_id)
        if ctx.shown is not None:
            if alias is not None:
                ctx.shown.register(alias, hit.message_id)
            else:
                ctx.shown.register_reference(hit.message_id)
        lines.append(render_hit(hit, alias or str(hit.message_id), ctx))
    return "\n".join(lines)


TOOL = Tool(
    spec=ToolSpec(
        name="search_history",
        description=(
            "Search this chat's whole history (older than what you see) for messages "
            "containing these words, in any language; best match first. Plain words only "
            f"(up to {MAX_QUERY_CHARS} characters): no operators. The ids shown work with "
            "the other tools."
        ),
        parameters={
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "words to look for"},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
            },
            "required": ["query"],
        },
    ),
    run=search_history,
    summary="search_history(query, limit=5) — find older messages of this chat by their words",
)

"""The trace page of one model call (`/calls/{call_id}`) and a chat's stored conversation.

A trace is read from its own file (`bot.agent.traces`); the page shows the request exactly
as it was handed to the provider, message by message with its role, the reply, its tool
calls and the results the next call carried, and the call's figures. Every text is
escaped by the template engine.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Protocol

from aiohttp import web

from bot.agent.traces import read_trace
from bot.app.dashboard.views import BadQuery, alias_lines, parse_int
from bot.config import Settings
from bot.domain.ids import SessionKey
from bot.errors import SessionNotFound
from bot.store_ports import HistoryLoader, SessionLookup

RECORDS_PER_PAGE = 50
MAX_CONVERSATION_RECORDS = 5_000


Page = tuple[int, str, dict[str, Any]]
"""(status, template, its values)."""


async def call_page(settings: Settings, call_id: str) -> Page:
    """The trace page of `call_id`, or a 404 that says how long traces are kept."""
    try:
        trace = await asyncio.to_thread(read_trace, settings.traces_dir, call_id)
    except ValueError as exc:
        return 500, "error.html", {"title": "Damaged trace", "detail": str(exc)}
    if trace is None:
        keep = settings.ledger.keep_requests_days
        detail = f"Call {call_id} has no stored trace: traces are kept {keep} days."
        return 404, "error.html", {"title": "No trace of this call", "detail": detail}
    return 200, "call.html", {"title": f"Call {call_id}", "trace": view(trace)}


def view(trace: dict[str, Any]) -> dict[str, Any]:
    """The trace with its tool-call arguments and schemas pretty-printed for the page."""
    request = trace.get("request") or {}
    response = trace.get("response") or {}
    messages = [
        {
            **m,
            "tool_calls": [_pretty_call(c) for c in m.get("tool_calls") or ()],
            "image_rows": [_image_row(i) for i in m.get("images") or ()],
        }
        for m in request.get("messages") or ()
    ]
    usage = response.get("usage") or {}
    reasoning = response.get("reasoning")
    return {
        **trace,
        "messages": messages,
        "tools": [
            {**t, "schema": json.dumps(t.get("parameters"), ensure_ascii=False, indent=2)}
            for t in request.get("tools") or ()
        ],
        "params": {
            k: request.get(k) for k in ("model", "max_output_tokens", "temperature", "tool_choice")
        },
        "cache_plan": request.get("cache_plan"),
        "reply": response.get("text") if response else None,
        "reply_calls": [_pretty_call(c) for c in response.get("tool_calls") or ()],
        "finish_reason": response.get("finish_reason"),
        "stop": response.get("stop"),
        "refusal": response.get("refusal") or "",
        "reasoning": (reasoning.get("text") or "") if isinstance(reasoning, dict) else "",
        "usage": usage,
        "sent": bool(request),
    }


def _image_row(image: object) -> dict[str, Any]:
    """One image a message sent: its label, size and token estimate, and the image itself
    as a thumbnail when the trace kept it whole (the dashboard is the owner's)."""
    if not isinstance(image, dict):  # a trace from before images had a shape
        image = {"url": str(image)}
    url = str(image.get("url") or "")
    whole = url.startswith("data:image/") and "chars cut]" not in url[-40:]
    return {
        "label": image.get("label") or "?",
        "width": image.get("width") or 0,
        "height": image.get("height") or 0,
        "tokens": image.get("tokens") or 0,
        "thumbnail": url if whole else "",
    }


def _pretty_call(call: dict[str, Any]) -> dict[str, Any]:
    arguments = call.get("arguments") or ""
    try:
        pretty = json.dumps(json.loads(arguments), ensure_ascii=False, indent=2)
    except (TypeError, ValueError):
        pretty = str(arguments)
    return {**call, "pretty": pretty}


class ConversationReader(SessionLookup, HistoryLoader, Protocol):
    """What the conversation page reads: the chat's session and its window."""


async def conversation_page(store: ConversationReader, request: web.Request) -> Page:
    """The stored records of a chat's window, newest page first, with their aliases."""
    chat_id = parse_int(request.match_info["chat_id"], "chat id", default=0)
    thread = parse_int(request.query.get("thread"), "thread", default=0)
    page = parse_int(request.query.get("page"), "page", default=1)
    if page < 1:
        raise BadQuery("page: pages start at 1")
    session = await store.find_session(SessionKey(chat_id=chat_id, thread_id=thread))
    if session is None:
        raise SessionNotFound(f"no session for chat {chat_id}")
    wanted = min(page * RECORDS_PER_PAGE, MAX_CONVERSATION_RECORDS)
    loaded = await store.load_history(session.id, max_records=wanted)
    records = loaded.records
    end = len(records) - (page - 1) * RECORDS_PER_PAGE
    if end <= 0 and page > 1:
        raise BadQuery(f"page: there are only {len(records)} records in the window")
    shown = records[max(0, end - RECORDS_PER_PAGE) : max(0, end)]
    more = (end > RECORDS_PER_PAGE and wanted < MAX_CONVERSATION_RECORDS) or loaded.has_earlier
    return (
        200,
        "conversation.html",
        {
            "title": f"Conversation of chat {chat_id}",
            "session": session,
            "aliases": alias_lines(shown, limit=RECORDS_PER_PAGE * 4),
            "page": page,
            "more": more and end > RECORDS_PER_PAGE,
        },
    )

"""The trace page of one model call (`/calls/{call_id}`) and a chat's stored conversation.

A trace is read from its own file (`bot.agent.traces`); the page shows the request exactly
as it was handed to the provider, message by message with its role, the reply, its tool
calls and the results the next call carried, and the call's figures. Every text is
escaped by the template engine.

A trace keeps the request body as it went over the wire (`wire_request`, OpenAI or
Anthropic shape); it is read back into messages, tools and parameters here. Traces written
before that hold `request` in our own shape: still read as they are (they age out with
`ledger.keep_requests_days`, 7 days by default, after which that branch has nothing to read).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aiohttp import web

from adapters.llm.openai_server_wire import from_request
from bot.agent.trace_reader import TraceReader, read_trace
from bot.agent.traces import request_json
from bot.app.dashboard.views import BadQuery, TurnCalls, alias_lines, parse_int
from bot.config import Settings
from bot.context.memory_block import shown_fact_ids
from bot.context.task_block import TASK_MARKER
from bot.domain.ids import SessionKey
from bot.domain.records import StoredRecord
from bot.errors import SessionNotFound
from bot.ports import SessionInfo
from bot.store_ports import ConversationStore

RECORDS_PER_PAGE = 50


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
    request = trace_request(trace)
    response = trace.get("response") or {}
    messages = [
        {
            **m,
            "tool_calls": [_pretty_call(c) for c in m.get("tool_calls") or ()],
            "image_rows": [_image_row(i) for i in m.get("images") or ()],
        }
        for m in request.get("messages") or ()
    ]
    _fill_image_facts(messages, trace.get("image_facts"))
    usage = response.get("usage") or {}
    reasoning = response.get("reasoning")
    # the turn's own part: from the current (last) member message on; what precedes it is
    # the stable prefix (system prompt and history) the page folds
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    new_from = users[-1] if users else 0
    return {
        **trace,
        "messages": messages,
        "stable": messages[:new_from],
        "fresh": messages[new_from:],
        "memory": shown_fact_ids(_text_of(messages[new_from])) if messages else (),
        "tools": [
            {**t, "schema": json.dumps(t.get("parameters"), ensure_ascii=False, indent=2)}
            for t in request.get("tools") or ()
        ],
        "params": {
            k: request.get(k) for k in ("model", "max_output_tokens", "temperature", "tool_choice")
        },
        "cache_plan": request.get("cache_plan") or trace.get("cache_plan"),
        "reply": response.get("text") if response else None,
        "reply_calls": [_pretty_call(c) for c in response.get("tool_calls") or ()],
        "finish_reason": response.get("finish_reason"),
        "stop": response.get("stop"),
        "refusal": response.get("refusal") or "",
        "reasoning": (reasoning.get("text") or "") if isinstance(reasoning, dict) else "",
        "usage": usage,
        "sent": bool(request),
    }


def _text_of(message: dict[str, Any]) -> str:
    """A message's text, whether sent as a string or as content parts."""
    content = message.get("content")
    if isinstance(content, list):
        return "".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
    return str(content or "")


def _fill_image_facts(messages: list[dict[str, Any]], facts: object) -> None:
    """A trace kept as the body sent: its images' label, size and tokens, which the body
    cannot say, come from `image_facts` (in the order the images appear)."""
    if not isinstance(facts, list):
        return
    rows = (row for m in messages for row in m["image_rows"])
    for row, fact in zip(rows, facts, strict=False):
        if isinstance(fact, dict):
            row.update({k: fact[k] for k in ("label", "width", "height", "tokens") if k in fact})


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


def trace_request(trace: dict[str, Any]) -> dict[str, Any]:
    """The request of a trace in our own shape (messages, tools, parameters), whichever
    way the file keeps it; `{}` for a call that was never sent."""
    request = trace.get("request")
    if isinstance(request, dict):
        return request  # the file's own shape (in-process model, or written before wire)
    wire = trace.get("wire_request")
    if not isinstance(wire, dict):
        return {}
    if trace.get("dialect") == "anthropic":
        return _from_anthropic(wire)
    try:
        return request_json(from_request(wire))
    except ValueError:  # a body the mapping does not know: shown as one raw message
        raw = json.dumps(wire, ensure_ascii=False, indent=2)
        return {"model": wire.get("model"), "messages": [{"role": "raw", "content": raw}]}


def _from_anthropic(body: dict[str, Any]) -> dict[str, Any]:
    """An Anthropic Messages body as messages: the system blocks first, then each message's
    text, its `tool_use` blocks as tool calls and its `tool_result` blocks as tool messages."""
    messages: list[dict[str, Any]] = []
    system = body.get("system")
    if system:
        messages.append({"role": "system", "content": _block_text(system)})
    for message in body.get("messages") or ():
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        calls: list[dict[str, Any]] = []
        texts: list[str] = []
        images = 0
        for block in blocks:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "tool_use":
                arguments = json.dumps(block.get("input"), ensure_ascii=False)
                calls.append(
                    {"id": block.get("id"), "name": block.get("name"), "arguments": arguments}
                )
            elif kind == "tool_result":
                messages.append(
                    {
                        "role": "tool",
                        "content": _block_text(block.get("content")),
                        "tool_call_id": block.get("tool_use_id"),
                        "is_error": bool(block.get("is_error")),
                    }
                )
            elif kind == "image":
                images += 1
            elif kind == "text":
                texts.append(str(block.get("text") or ""))
        if texts or calls or images:
            messages.append(
                {
                    "role": message.get("role"),
                    "content": "\n".join(texts),
                    "tool_calls": calls,
                    "images": ["image"] * images,
                }
            )
    tools = [
        {
            "name": t.get("name"),
            "description": t.get("description"),
            "parameters": t.get("input_schema"),
        }
        for t in body.get("tools") or ()
        if isinstance(t, dict)
    ]
    choice = body.get("tool_choice")
    return {
        "model": body.get("model"),
        "messages": messages,
        "tools": tools,
        "max_output_tokens": body.get("max_tokens"),
        "temperature": body.get("temperature"),
        "tool_choice": choice.get("type") if isinstance(choice, dict) else choice,
    }


def _block_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text") or "") for b in content if isinstance(b, dict) and "text" in b
        )
    return ""


def _pretty_call(call: dict[str, Any]) -> dict[str, Any]:
    arguments = call.get("arguments") or ""
    try:
        pretty = json.dumps(json.loads(arguments), ensure_ascii=False, indent=2)
    except (TypeError, ValueError):
        pretty = str(arguments)
    return {**call, "pretty": pretty}


MAX_PAGE_LINKS = 15
"""Page links shown around the current one (the first and the last always are)."""


async def conversation_page(store: ConversationStore, request: web.Request) -> Page:
    """A chat's whole stored conversation (its active branch, from the first message), 50
    records a page, newest page first, a link per page; `?q=words` searches every stored
    message of the chat with the recall index (`search_history`'s) and links each hit to
    its page."""
    chat_id = parse_int(request.match_info["chat_id"], "chat id", default=0)
    thread = parse_int(request.query.get("thread"), "thread", default=0)
    page = parse_int(request.query.get("page"), "page", default=1)
    query = (request.query.get("q") or "").strip()[:256]
    if page < 1:
        raise BadQuery("page: pages start at 1")
    session = await store.find_session(SessionKey(chat_id=chat_id, thread_id=thread))
    if session is None:
        raise SessionNotFound(f"no session for chat {chat_id}")
    records = await store.load_path(session.id)
    pages = max(1, -(-len(records) // RECORDS_PER_PAGE))
    if page > pages:
        raise BadQuery(f"page: there are {pages} pages ({len(records)} records)")
    end = len(records) - (page - 1) * RECORDS_PER_PAGE
    shown = records[max(0, end - RECORDS_PER_PAGE) : end]
    hits: list[dict[str, Any]] = []
    if query:
        page_of = {
            message_id: 1 + (len(records) - 1 - index) // RECORDS_PER_PAGE
            for index, record in enumerate(records)
            for message_id in record.message_ids
            if message_id is not None
        }
        found = await store.search_messages(chat_id, thread, query, limit=RECORDS_PER_PAGE)
        hits = [{"message": m, "page": page_of.get(m.message_id)} for m in found]
    return (
        200,
        "conversation.html",
        {
            "title": f"Conversation of chat {chat_id}",
            "session": session,
            "chat_name": session.title or _private_name(session, records),
            # newest first, as the page says (its pages are numbered from the newest)
            "aliases": tuple(reversed(alias_lines(shown, limit=RECORDS_PER_PAGE * 4))),
            "page": page,
            "pages": pages,
            "links": _page_links(page, pages),
            "records": len(records),
            "query": query,
            "hits": hits,
            "thread": thread,
        },
    )


def _page_links(page: int, pages: int) -> list[int | None]:
    """Page numbers to link (None: a gap): all of them, or the first, the last and those
    around `page`."""
    if pages <= MAX_PAGE_LINKS:
        return list(range(1, pages + 1))
    half = MAX_PAGE_LINKS // 2 - 1
    low, high = max(2, page - half), min(pages - 1, page + half)
    links: list[int | None] = [1]
    if low > 2:
        links.append(None)
    links.extend(range(low, high + 1))
    if high < pages - 1:
        links.append(None)
    links.append(pages)
    return links


_BLOCKS = ("\n\n[Turn context]", "\n\n[Already told the user]", "\n\n[Reactions since")
TEXT_CHARS = 200


def turn_texts(traces_dir: Path, turns: Sequence[TurnCalls]) -> dict[str, tuple[str, str]]:
    """(the question, the reply) of each turn, from its calls' traces: the member message
    its first call answered (header and per-turn blocks cut off) and its last call's reply
    text; a turn whose traces were pruned has none."""
    texts: dict[str, tuple[str, str]] = {}
    reader = TraceReader(traces_dir)  # each day's indexes read once for the whole page
    for turn in turns:
        calls = [c for c in turn.calls if c.purpose in ("turn", "job") and c.call_id]
        if not calls:
            continue
        question = reply = ""
        try:
            first = reader.read(calls[0].call_id or "")
            last = first if len(calls) == 1 else reader.read(calls[-1].call_id or "")
        except ValueError:
            continue
        if first is not None and (said := _user_texts(first)):
            question = _member_text(said[-1])
        if last is not None:
            reply = str((last.get("response") or {}).get("text") or "")
        if question or reply:
            texts[turn.turn_id] = (_cut(question), _cut(reply))
    return texts


def _private_name(session: SessionInfo, records: Sequence[StoredRecord]) -> str | None:
    """A private chat's name: its member's, from their latest stored message."""
    if session.scene == "group":
        return None
    for record in reversed(records):
        if record.body.kind == "user" and record.body.sender.name:
            return str(record.body.sender.name)
    return None


def _user_texts(trace: dict[str, Any]) -> list[str]:
    """The text of each user message of a call's trace, in order: from `request` (a call
    made in-process) or else `wire_request`, the body as sent over HTTP (OpenAI's and
    Anthropic's wires: content a string, or parts whose `text` is read)."""
    request = trace.get("request") or trace.get("wire_request") or {}
    messages = request.get("messages") if isinstance(request, dict) else None
    texts: list[str] = []
    for message in messages if isinstance(messages, list) else ():
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(
                str(part.get("text") or "")
                for part in content
                if isinstance(part, dict) and part.get("type") == "text"
            )
        if content:
            texts.append(str(content))
    return texts


def _member_text(content: str) -> str:
    """What the member wrote: the rendered message without its header line and the turn's
    blocks after it."""
    head, _, body = content.partition("\n")
    if head == TASK_MARKER:  # a scheduled task's turn: its instruction is the question
        body = body.partition("\ninstruction:\n")[2]
    elif not head.startswith("[id:"):
        body = content
    ends = [body.find(block) for block in _BLOCKS if block in body]
    return body[: min(ends)] if ends else body


def _cut(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= TEXT_CHARS else flat[: TEXT_CHARS - 1] + "…"

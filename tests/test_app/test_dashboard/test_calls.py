"""Per-call traces (issue 27 item 5): the demo's real turns leave one trace per model call,
named by the `call_id` of its ledger line, and `/calls/{call_id}` shows it."""

from __future__ import annotations

import gzip
import html
import re

from aiohttp import web
from aiohttp.test_utils import TestClient

from bot.agent.ledger import LedgerEntry
from bot.agent.ledger_read import read_entries
from bot.agent.trace_reader import read_trace, trace_path
from bot.agent.traces import encode_trace
from bot.app.demo_scenario import build_scenario
from tests.test_app.test_dashboard.conftest import HOSTILE_TEXT, DemoData

Client = TestClient[web.Request, web.Application]


def _calls(demo: DemoData) -> list[LedgerEntry]:
    return [e for e in read_entries(demo.data_dir / "agent-traces") if e.purpose == "turn"]


def test_every_ledger_line_names_a_stored_compressed_trace(demo_data: DemoData) -> None:
    calls = _calls(demo_data)
    assert calls
    traces = demo_data.data_dir / "agent-traces"
    for entry in calls:
        assert re.fullmatch(r"\d{8}-[0-9a-f]{12}", entry.call_id), entry.call_id
        stored = read_trace(traces, entry.call_id)
        assert stored is not None
        assert stored["call_id"] == entry.call_id
        assert stored["turn_id"] == entry.turn_id
        assert stored["request"]["messages"][0]["role"] == "system"
    assert len({e.call_id for e in calls}) == len(calls)
    # appended to a few compressed segments a day, each with its index: not a file per call
    files = [p for p in (traces / "calls").rglob("*") if p.is_file()]
    assert {p.suffix for p in files} == {".gz", ".idx"}
    assert len(files) < len(calls)
    for segment in (p for p in files if p.suffix == ".gz"):
        assert gzip.decompress(segment.read_bytes()).startswith(b'{"call_id":"')


def test_a_tool_calling_call_keeps_the_results_the_next_call_carried(
    demo_data: DemoData,
) -> None:
    traces = demo_data.data_dir / "agent-traces"
    with_tools = [e for e in _calls(demo_data) if e.tool_calls]
    assert with_tools, "the demo's script calls tools"
    trace = read_trace(traces, with_tools[0].call_id)
    assert trace is not None
    asked = {c["id"] for c in trace["response"]["tool_calls"]}
    assert asked
    assert {r["tool_call_id"] for r in trace["tool_results"]} == asked


async def test_the_trace_page_shows_the_request_as_sent_and_the_reply(
    demo_data: DemoData, client: Client
) -> None:
    traces = demo_data.data_dir / "agent-traces"
    entry = next(e for e in reversed(_calls(demo_data)) if e.chat == demo_data.group_chat)
    trace = read_trace(traces, entry.call_id)
    assert trace is not None
    response = await client.get(f"/calls/{entry.call_id}")
    assert response.status == 200
    page = await response.text()
    roles = re.findall(r'data-role="(\w+)"', page)
    assert roles == [m["role"] for m in trace["request"]["messages"]]
    last_user = [m for m in trace["request"]["messages"] if m["role"] == "user"][-1]
    assert html.escape(last_user["content"])[:200] in page
    assert f'data-field="input">{entry.input_tokens:,}<' in page
    assert f'data-field="latency">{entry.latency_ms:,} ms<' in page
    if trace["response"]["text"]:
        assert html.escape(trace["response"]["text"])[:100] in page
    # it opens on the reply; the stable prefix (system prompt, history) is folded and the
    # turn's own messages, from the current one on, are open
    assert page.index('id="reply"') < page.index('id="request"')
    folded = page.split('<details id="stable">')[1].split("</details>")[0]
    fresh = page.split('id="fresh"')[1].split("</ol>")[0]
    assert re.findall(r'data-role="(\w+)"', folded)[0] == "system"
    assert re.findall(r'data-role="(\w+)"', fresh)[0] == "user"
    assert html.escape(last_user["content"])[:200] in fresh
    # its time in the dashboard's zone, as every other time (never the stored ISO UTC)
    assert trace["ts"] not in page


async def test_the_chat_page_links_each_call_and_hostile_text_stays_text(
    demo_data: DemoData, client: Client
) -> None:
    page = await (await client.get(f"/chats/{demo_data.group_chat}")).text()
    ids = re.findall(r'href="/calls/(\d{8}-[0-9a-f]{12})"', page)
    assert ids
    for call_id in ids[:3]:
        assert (await client.get(f"/calls/{call_id}")).status == 200
    conversation = await (await client.get(f"/chats/{demo_data.group_chat}/conversation")).text()
    assert re.search(r"<code>m\d+</code>", conversation)
    assert "<script>alert" not in conversation
    assert "&lt;script&gt;alert(" in conversation
    assert HOSTILE_TEXT.endswith("is this shown as text?")
    assert "is this shown as text?" in conversation


async def test_an_unknown_or_pruned_call_is_a_clear_404(client: Client) -> None:
    response = await client.get("/calls/20200101-0123456789ab")
    assert response.status == 404
    assert "traces are kept 7 days" in await response.text()
    assert (await client.get("/calls/not-a-call")).status == 404


async def test_a_summary_calls_trace_keeps_what_it_sent(
    demo_data: DemoData, client: Client
) -> None:
    """The demo's group conversation folds old turns: the summary call's trace holds its
    request (the chat's system prompt, then the turns it folds), not only the answer."""
    traces = demo_data.data_dir / "agent-traces"
    folds = [e for e in read_entries(traces) if e.purpose == "compaction" and e.call_id]
    assert folds, "the demo makes summary calls"
    trace = read_trace(traces, folds[-1].call_id)
    assert trace is not None
    messages = trace["request"]["messages"]
    assert messages[0]["role"] == "system"
    assert len(messages) > 2
    assert trace["response"]["text"]
    page = await (await client.get(f"/calls/{folds[-1].call_id}")).text()
    assert page.count('class="msg role-') == len(messages)
    assert "This call was never sent" not in page


async def test_an_unpriced_call_says_no_prices_instead_of_zero(
    demo_data: DemoData, client: Client
) -> None:
    """The demo's offline route has no prices: its cost is unknown, as on the overview."""
    entry = _calls(demo_data)[-1]
    assert entry.cost is None
    trace = read_trace(demo_data.data_dir / "agent-traces", entry.call_id)
    assert trace is not None
    assert trace["cost"] is None
    page = await (await client.get(f"/calls/{entry.call_id}")).text()
    cost = re.search(r'data-field="cost">([^<]*)<', page)
    assert cost is not None
    assert cost.group(1) == "no prices configured"
    assert "0.0000" not in page


async def test_the_trace_page_folds_the_models_reasoning(
    demo_data: DemoData, client: Client
) -> None:
    """A call that came with reasoning: the page shows it inside a closed `<details>`, as
    text, with its reasoning tokens and why the model stopped."""
    traces = demo_data.data_dir / "agent-traces"
    entry = _calls(demo_data)[-1]
    trace = read_trace(traces, entry.call_id)
    assert trace is not None
    thought = "First check the <b>calendar</b>, then answer."
    response = {
        **trace["response"],
        "reasoning": {"format": "reasoning_content", "text": thought, "payload": ""},
        "stop": "end",
        "usage": {**trace["response"]["usage"], "reasoning_tokens": 321},
    }
    call_id = entry.call_id[:-4] + "beef"
    path = trace_path(traces, call_id)
    assert path is not None
    path.write_bytes(encode_trace({**trace, "call_id": call_id, "response": response}))
    page = await (await client.get(f"/calls/{call_id}")).text()
    folded = re.search(r'<details id="reasoning">(.*?)</details>', page, re.S)
    assert folded is not None  # closed: no `open` attribute
    assert html.escape(thought) in folded.group(1)
    assert 'data-field="reasoning-tokens">321<' in page
    assert 'data-field="stop">end<' in page


async def test_the_conversation_pages_through_the_whole_history_and_searches_it(
    demo_data: DemoData, client: Client
) -> None:
    base = f"/chats/{demo_data.group_chat}/conversation"
    first = await (await client.get(base)).text()
    pages = [int(n) for n in re.findall(r'<a href="\?page=(\d+)">\d+</a>', first)]
    last = max(pages)
    # the demo's window moved (a summary holds the start): the history goes past it
    assert last * 50 > 100
    oldest = await client.get(f"{base}?page={last}")
    assert oldest.status == 200
    first_said = build_scenario(bot_username="demo_helper_bot")[0].text
    assert html.escape(first_said)[:60] in await oldest.text()
    assert (await client.get(f"{base}?page={last + 1}")).status == 400

    found = await (await client.get(f"{base}?q=CSV+export")).text()
    hits = found.split('id="hits"')[1].split("</section>")[0]
    assert "they want the export in CSV" in hits
    page_links = [int(n) for n in re.findall(r'href="\?page=(\d+)&amp;q=CSV', hits)]
    assert page_links
    assert all(1 <= n <= last for n in page_links)
    nothing = await (await client.get(f"{base}?q=zebra-unicorn")).text()
    assert "No stored message matches." in nothing


async def test_each_recent_turn_shows_its_question_and_its_reply(
    demo_data: DemoData, client: Client
) -> None:
    page = await (await client.get(f"/chats/{demo_data.group_chat}")).text()
    said = re.findall(
        r'<tr class="turn-text" data-turn="([^"]+)">.*?<span class="said-q"[^>]*>(.*?)</span>'
        r'.*?<span class="said-a"[^>]*>(.*?)</span>',
        page,
        re.S,
    )
    assert len(said) >= 5
    entries = {e.turn_id: e for e in _calls(demo_data) if e.purpose == "turn"}
    for turn_id, question, reply in said[:5]:
        trace = read_trace(demo_data.data_dir / "agent-traces", entries[turn_id].call_id or "")
        assert trace is not None
        assert "[Turn context]" not in question  # what the member wrote, not the blocks
        assert not question.startswith("[id:")
        assert question.strip()
        assert question != "—"
        sent = " ".join(str(trace["response"]["text"] or "").split())
        assert html.unescape(reply).rstrip("…") in sent or reply.startswith("(no text")

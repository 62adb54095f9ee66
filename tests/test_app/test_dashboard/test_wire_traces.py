"""Traces written from the request body the provider sent (issue 40): the file holds those
bytes, and the trace page reads them back as messages, tools and parameters."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from adapters.llm.anthropic_provider import AnthropicProvider
from adapters.llm.openai_provider import OpenAIProvider
from adapters.llm.scripted import Reply, ScriptedModel
from bot.agent.trace_reader import read_trace
from bot.agent.trace_writer import TraceWriter
from bot.agent.traces import CUT_STRING_CHARS, MAX_TRACE_CHARS, encode_trace, new_call_id
from bot.app.dashboard.calls import view
from bot.domain.messages import CachePlan, ChatMessage, ToolCall
from bot.ports import LLMRequest, ToolSpec
from testkit.fake_anthropic import FakeAnthropicServer
from testkit.fake_server import FakeOpenAIServer
from tests.test_agent.rig import AT, model_call

REQUEST = LLMRequest(
    model="m",
    messages=(
        ChatMessage(role="system", content="You are a bot. 你好"),
        ChatMessage(role="user", content="look up the weather"),
        ChatMessage(
            role="assistant",
            content="",
            tool_calls=(ToolCall(id="c1", name="search_notes", arguments='{"query": "w"}'),),
        ),
        ChatMessage(role="tool", content="sunny", tool_call_id="c1", name="search_notes"),
    ),
    tools=(
        ToolSpec(
            name="search_notes",
            description="Search notes.",
            parameters={"type": "object", "properties": {"query": {"type": "string"}}},
        ),
    ),
    max_output_tokens=300,
    cache_plan=CachePlan(system_end=0, last_stable=2),
)


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
async def test_a_trace_keeps_the_body_sent_and_the_page_reads_it_back(
    tmp_path: Path, dialect: str
) -> None:
    server: FakeOpenAIServer = (
        FakeAnthropicServer(ScriptedModel([Reply("It is sunny.")]))
        if dialect == "anthropic"
        else FakeOpenAIServer(ScriptedModel([Reply("It is sunny.")]))
    )
    seen: list[str] = []

    async def sink(text: str) -> None:
        seen.append(text)

    async with server:
        kind = AnthropicProvider if dialect == "anthropic" else OpenAIProvider
        async with kind(server.base_url, "sk-test") as provider:
            response = await provider.complete(REQUEST, on_text=sink)
    assert seen, "the call was streamed"
    call_id = new_call_id(AT)
    writer = TraceWriter(tmp_path)
    await writer.on_model_call(model_call(call_id=call_id, request=REQUEST, response=response))
    await writer.drain()

    trace = read_trace(tmp_path, call_id)
    assert trace is not None
    assert trace["dialect"] == dialect
    assert trace["wire_request"] == server.requests[-1], "the body as the server received it"
    assert trace["request"] is None, "the request is not kept a second time"
    assert "sent" not in trace["response"]
    shown = view(trace)
    assert [m["role"] for m in shown["messages"]] == ["system", "user", "assistant", "tool"]
    assert [m["content"] for m in shown["messages"]] == [
        "You are a bot. 你好",
        "look up the weather",
        "",
        "sunny",
    ]
    [call] = shown["messages"][2]["tool_calls"]
    assert (call["id"], call["name"], json.loads(call["arguments"])) == (
        "c1",
        "search_notes",
        {"query": "w"},
    )
    assert shown["messages"][3]["tool_call_id"] == "c1"
    assert [t["name"] for t in shown["tools"]] == ["search_notes"]
    assert '"query"' in shown["tools"][0]["schema"]
    assert shown["params"]["max_output_tokens"] == 300
    assert shown["reply"] == "It is sunny."
    assert shown["cache_plan"]["last_stable"] == 2, "the plan the body shows only as markers"


def test_a_huge_sent_body_is_cut_like_any_trace() -> None:
    body = json.dumps({"messages": [{"role": "user", "content": "字" * MAX_TRACE_CHARS}]})
    trace = {
        "call_id": "20260101-0123456789ab",
        "request": None,
        "response": {"text": "ok", "tool_calls": []},
        "tool_results": [],
        "truncated": False,
        "dialect": "openai",
        "wire_request": body.encode(),
    }
    stored = json.loads(gzip.decompress(encode_trace(trace)))
    assert stored["truncated"] is True
    content = stored["wire_request"]["messages"][0]["content"]
    assert content.startswith("字" * CUT_STRING_CHARS)
    assert len(content) < CUT_STRING_CHARS + 40


def test_a_sent_body_within_the_bound_is_stored_byte_for_byte() -> None:
    body = b'{"model":"m","messages":[{"role":"user","content":"\xe4\xbd\xa0"}]}'
    trace = {"call_id": "20260101-0123456789ab", "request": None, "wire_request": body}
    stored = gzip.decompress(encode_trace(trace))
    assert stored.endswith(b',"wire_request":' + body + b"}")
    assert json.loads(stored)["wire_request"]["messages"][0]["content"] == "你"

"""Provider dialects on the wire: cache markers from the plan, options by host, usage as
billed and overflow from every provider's own bodies (fixtures under tests/fixtures/llm/)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from adapters.llm import (
    anthropic_wire,
    cache_breakpoints,
    openai_stream,
    openai_wire,
    provider_errors,
)
from adapters.llm.dialects import WireOptions, max_tokens_key
from adapters.llm.provider_defaults import options_for
from bot.domain.messages import CachePlan, ChatMessage, ImagePart, ToolCall
from bot.errors import ContextOverflow, ProviderBadResponse, ProviderUnavailable
from bot.ports import LLMRequest, ToolSpec
from testkit import anthropic_server_wire

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "llm"
OVERFLOWS = sorted(FIXTURES.glob("*/overflow*.json"))
USAGES = sorted(FIXTURES.glob("*/usage*.json"))
ANTHROPIC_USAGES = [path for path in USAGES if path.parent.name == "anthropic"]


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def conversation(plan: CachePlan | None) -> LLMRequest:
    return LLMRequest(
        model="m",
        messages=(
            ChatMessage(role="system", content="You are the bot."),
            ChatMessage(role="user", content="[summary] earlier"),
            ChatMessage(role="user", content="old question"),
            ChatMessage(
                role="assistant",
                content="",
                tool_calls=(ToolCall(id="c1", name="search", arguments='{"q": "x"}'),),
            ),
            ChatMessage(role="tool", content="found", tool_call_id="c1", name="search"),
            ChatMessage(role="assistant", content="old answer"),
            ChatMessage(role="user", content="new question\n\n[per-turn blocks]"),
        ),
        tools=(ToolSpec(name="search", description="find", parameters={"type": "object"}),),
        max_output_tokens=100,
        cache_plan=plan,
    )


PLAN = CachePlan(system_end=0, window_head=1, previous_read=4, last_stable=5, session_key="s1")


def test_every_fixture_names_its_source() -> None:
    for path in [*OVERFLOWS, *USAGES]:
        assert load(path).get("source"), path


def test_there_is_an_overflow_fixture_per_provider() -> None:
    names = {path.parent.name for path in OVERFLOWS}
    expected = {"openai", "deepseek", "vllm", "openrouter", "anthropic", "qwen", "moonshot"}
    assert names >= expected | {"llamacpp", "gemini", "xai", "ollama"}


@pytest.mark.parametrize("path", OVERFLOWS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_overflow_fixture_is_recognised(path: Path) -> None:
    fixture = load(path)
    body = fixture["body"]
    if fixture["status"] == 200:  # an error inside a 200 body (OpenRouter)
        with pytest.raises(ContextOverflow):
            openai_wire.from_response(body)
        return
    error = provider_errors.classify_error(fixture["status"], json.dumps(body))
    assert isinstance(error, ContextOverflow), error
    assert "HTTP 400" in str(error)


def test_an_error_in_a_200_body_is_a_provider_error_not_no_choices() -> None:
    body = {"error": {"code": 502, "message": "Provider returned error"}}
    with pytest.raises(ProviderUnavailable, match="Provider returned error"):
        openai_wire.from_response(body)
    with pytest.raises(ProviderBadResponse, match="no choices"):
        openai_wire.from_response({"id": "x"})


@pytest.mark.parametrize("path", USAGES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_usage_as_billed_from_every_provider(path: Path) -> None:
    fixture = load(path)
    decode = (
        anthropic_wire.from_response
        if path.parent.name == "anthropic"
        else openai_wire.from_response
    )
    usage = decode(fixture["body"]).usage
    assert usage is not None
    expected = fixture["expected"]
    assert (
        usage.input_tokens,
        usage.output_tokens,
        usage.cached_tokens,
        usage.cache_write_tokens,
        usage.cache_write_1h_tokens,
        usage.reasoning_tokens,
    ) == (
        expected["input_tokens"],
        expected["output_tokens"],
        expected["cached_tokens"],
        expected["cache_write_tokens"],
        expected.get("cache_write_1h_tokens", 0),
        expected.get("reasoning_tokens", 0),
    )


def test_anthropic_writes_from_the_ttl_split_when_the_total_is_missing() -> None:
    usage = openai_wire.anthropic_usage(
        {
            "input_tokens": 10,
            "cache_read_input_tokens": 5,
            "cache_creation": {"ephemeral_5m_input_tokens": 3, "ephemeral_1h_input_tokens": 4},
            "output_tokens": 2,
        }
    )
    assert (usage.input_tokens, usage.cached_tokens, usage.cache_write_tokens) == (22, 5, 7)
    assert usage.cache_write_1h_tokens == 4


# ---------------------------------------------------------------- cache markers


def markers(body: dict[str, Any], key: str = "cache_control") -> list[int]:
    found = []
    for index, message in enumerate(body["messages"]):
        content = message.get("content")
        if isinstance(content, list) and any(key in part for part in content):
            found.append(index)
    return found


def test_openrouter_marks_the_plan_on_content_parts() -> None:
    options = options_for("https://openrouter.ai/api/v1")
    body = openai_wire.to_request(conversation(PLAN), options)
    # the assistant message of only tool calls has no text part: its point is skipped
    assert markers(body) == [0, 1, 4, 5]
    part = body["messages"][5]["content"][-1]
    assert part == {"type": "text", "text": "old answer", "cache_control": {"type": "ephemeral"}}
    assert body["messages"][6]["content"] == "new question\n\n[per-turn blocks]"


def test_ttl_1h_is_written_on_every_marker() -> None:
    options = options_for("https://openrouter.ai/api/v1", cache_ttl="1h")
    body = openai_wire.to_request(conversation(PLAN), options)
    parts = [
        part
        for message in body["messages"]
        if isinstance(message["content"], list)
        for part in message["content"]
        if "cache_control" in part
    ]
    assert len(parts) == 4
    assert {part["cache_control"]["ttl"] for part in parts} == {"1h"}


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_a_plan_pointing_at_the_current_message_is_refused(kind: str) -> None:
    request = conversation(CachePlan(system_end=0, last_stable=6, previous_read=9))
    if kind == "anthropic":
        body = anthropic_wire.to_request(request)
        marked = [
            i
            for i, m in enumerate(body["messages"])
            if any("cache_control" in block for block in m["content"])
        ]
        assert marked == []
        assert "cache_control" in body["system"][-1]
        assert all("cache_control" not in b for b in body["messages"][-1]["content"])
    else:
        body = openai_wire.to_request(request, options_for("https://openrouter.ai/api/v1"))
        assert markers(body) == [0]


def test_cache_off_and_auto_send_no_markers() -> None:
    for options in (
        options_for("https://openrouter.ai/api/v1", cache="off"),
        options_for("https://openrouter.ai/api/v1", cache="auto"),
        options_for("https://api.deepseek.com"),
    ):
        body = openai_wire.to_request(conversation(PLAN), options)
        assert markers(body) == []
    off = options_for("https://api.anthropic.com", kind="anthropic", cache="off")
    text = json.dumps(anthropic_wire.to_request(conversation(PLAN), off))
    assert "cache_control" not in text
    key_off = options_for("https://api.openai.com/v1", cache="off")
    assert "prompt_cache_key" not in openai_wire.to_request(conversation(PLAN), key_off)


def test_gpt56_gets_explicit_breakpoints_not_on_assistant_output() -> None:
    options = options_for("https://api.openai.com/v1")
    assert options.cache_dialect == "openai_breakpoint"
    body = openai_wire.to_request(replace(conversation(PLAN), model="gpt-5.6"), options)
    found = markers(body, "prompt_cache_breakpoint")
    assert found == [0, 1, 4]  # three at most (the implicit one takes the fourth); no assistant
    assert markers(body) == []
    assert body["prompt_cache_key"] == "s1"
    for model in ("gpt-4.1", "gpt-5", "gpt-5.5-mini", "o3"):
        older = openai_wire.to_request(replace(conversation(PLAN), model=model), options)
        assert markers(older, "prompt_cache_breakpoint") == [], model
    for model in ("gpt-5.6-mini", "gpt-6", "openai/gpt-5.7"):
        newer = openai_wire.to_request(replace(conversation(PLAN), model=model), options)
        assert markers(newer, "prompt_cache_breakpoint") == [0, 1, 4], model
    auto = options_for("https://api.openai.com/v1", cache="auto")
    plain = openai_wire.to_request(replace(conversation(PLAN), model="gpt-5.6"), auto)
    assert markers(plain, "prompt_cache_breakpoint") == []


def test_max_tokens_param_by_model_and_profile() -> None:
    request = conversation(None)
    gpt5 = LLMRequest(model="gpt-5-mini", messages=request.messages, max_output_tokens=50)
    body = openai_wire.to_request(gpt5, options_for("https://api.openai.com/v1"))
    assert body["max_completion_tokens"] == 50
    assert "max_tokens" not in body
    o3 = LLMRequest(model="openai/o3", messages=request.messages, max_output_tokens=5)
    assert "max_completion_tokens" in openai_wire.to_request(o3, WireOptions())
    forced = options_for("https://llm.example/v1", max_tokens_param="max_completion_tokens")
    assert "max_tokens" not in openai_wire.to_request(request, forced)
    assert max_tokens_key(WireOptions(), "deepseek-chat") == "max_tokens"


def test_host_defaults() -> None:
    assert options_for("https://api.anthropic.com").kind == "anthropic"
    deepseek_anthropic = options_for("https://api.deepseek.com/anthropic")
    assert deepseek_anthropic.kind == "anthropic"
    assert deepseek_anthropic.cache == "breakpoints"
    assert options_for("https://api.deepseek.com/anthropic", kind="openai").kind == "openai"
    assert options_for("https://api.openai.com/v1").prompt_cache_key
    assert not options_for("https://api.deepseek.com").prompt_cache_key
    assert options_for("https://api.x.ai/v1").conversation_header == "x-grok-conv-id"
    assert options_for("https://dashscope.aliyuncs.com/compatible-mode/v1").marks_breakpoints
    assert not options_for("http://localhost:11434/v1").marks_breakpoints
    assert not options_for("https://api.moonshot.ai/v1").marks_breakpoints
    assert not options_for(
        "https://generativelanguage.googleapis.com/v1beta/openai"
    ).marks_breakpoints


# ---------------------------------------------------------------- anthropic request


def test_anthropic_request_shape() -> None:
    request = LLMRequest(
        model="claude-sonnet-4-5",
        messages=(
            ChatMessage(role="system", content="rules"),
            ChatMessage(role="system", content="tools note"),
            ChatMessage(
                role="user", content="look", images=(ImagePart(url="data:image/png;base64,AAAA"),)
            ),
            ChatMessage(
                role="assistant",
                content="checking",
                tool_calls=(
                    ToolCall(id="t1", name="a", arguments='{"x": 1}'),
                    ToolCall(id="t2", name="b", arguments="{}"),
                ),
            ),
            ChatMessage(role="tool", content="one", tool_call_id="t1", name="a"),
            ChatMessage(role="tool", content="bad", tool_call_id="t2", name="b", is_error=True),
            ChatMessage(role="user", content="and now?"),
        ),
        tools=(ToolSpec(name="a", description="A", parameters={"type": "object"}),),
        tool_choice="auto",
        cache_plan=CachePlan(system_end=1, last_stable=5),
    )
    body = anthropic_wire.to_request(request)
    assert body["max_tokens"] == anthropic_wire.DEFAULT_MAX_TOKENS
    # the system prompt lives as long as the chat: 1 h, before the 5m conversation points
    assert body["system"] == [
        {"type": "text", "text": "rules"},
        {"type": "text", "text": "tools note", "cache_control": {"type": "ephemeral", "ttl": "1h"}},
    ]
    assert body["tools"] == [{"name": "a", "description": "A", "input_schema": {"type": "object"}}]
    assert body["tool_choice"] == {"type": "auto"}
    first, second, results, last = body["messages"]
    assert first["content"][1]["source"] == {
        "type": "base64",
        "media_type": "image/png",
        "data": "AAAA",
    }
    assert second["content"][1:] == [
        {"type": "tool_use", "id": "t1", "name": "a", "input": {"x": 1}},
        {"type": "tool_use", "id": "t2", "name": "b", "input": {}},
    ]
    assert results["role"] == "user"
    assert results["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": "one"},
        {
            "type": "tool_result",
            "tool_use_id": "t2",
            "content": "bad",
            "is_error": True,
            "cache_control": {"type": "ephemeral"},
        },
    ]
    assert last == {"role": "user", "content": [{"type": "text", "text": "and now?"}]}
    back = anthropic_server_wire.from_request(body)
    assert [m.role for m in back.messages] == [
        "system",
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "user",
    ]
    assert back.messages[5].is_error
    assert back.messages[5].name == "b"


def test_anthropic_error_and_retry_headers() -> None:
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    assert isinstance(provider_errors.classify_error(529, body), ProviderUnavailable)
    limited = provider_errors.classify_error(
        429,
        {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
        {"retry-after": "7"},
    )
    assert getattr(limited, "retry_after", None) == 7.0
    with pytest.raises(ProviderUnavailable):
        anthropic_wire.StreamState().feed("error", body)


def test_a_tool_step_after_the_current_message_may_be_a_point() -> None:
    base = conversation(None)
    step = LLMRequest(
        model="m",
        messages=(
            *base.messages,
            ChatMessage(
                role="assistant",
                content="",
                tool_calls=(ToolCall(id="c2", name="search", arguments="{}"),),
            ),
            ChatMessage(role="tool", content="more", tool_call_id="c2", name="search"),
        ),
        cache_plan=CachePlan(system_end=0, previous_read=5, last_stable=8),
    )
    assert cache_breakpoints.breakpoint_indexes(step, 4) == (0, 5, 8)
    refused = CachePlan(system_end=0, last_stable=6)
    assert cache_breakpoints.breakpoint_indexes(replace(step, cache_plan=refused), 4) == (0,)


def anthropic_turn(tool_choice: str | None) -> LLMRequest:
    return LLMRequest(
        model="claude-sonnet-4-5",
        messages=(
            ChatMessage(role="system", content="rules"),
            ChatMessage(role="user", content="[summary] earlier", is_breadcrumb=True),
            ChatMessage(role="user", content="old question"),
            ChatMessage(role="assistant", content="old answer"),
            ChatMessage(role="user", content="new question\n\n[Turn context]\ntime: now"),
        ),
        tools=(ToolSpec(name="a", description="A", parameters={"type": "object"}),),
        tool_choice=tool_choice,  # type: ignore[arg-type]
        cache_plan=CachePlan(system_end=0, window_head=1, previous_read=2, last_stable=3),
    )


def anthropic_markers(body: dict[str, Any]) -> list[tuple[str, int, str]]:
    points = anthropic_server_wire.cache_breakpoints(body)
    return [(p.where, p.prefix_blocks, p.ttl) for p in points]


def test_anthropic_writes_the_system_prompt_for_an_hour_and_the_conversation_for_the_ttl() -> None:
    five = anthropic_wire.to_request(anthropic_turn(None), options_for("https://api.anthropic.com"))
    assert [ttl for _, _, ttl in anthropic_markers(five)] == ["1h", "5m", "5m", "5m"]
    hour = options_for("https://api.anthropic.com", cache_ttl="1h")
    body = anthropic_wire.to_request(anthropic_turn(None), hour)
    assert {ttl for _, _, ttl in anthropic_markers(body)} == {"1h"}


def test_a_tool_choice_none_request_marks_only_what_it_shares_with_the_turns() -> None:
    """Anthropic keys message blocks by tool_choice: a mark on them would write an entry no
    turn request (tool_choice auto) ever reads; the tools and system prompt are shared."""
    body = anthropic_wire.to_request(
        anthropic_turn("none"), options_for("https://api.anthropic.com")
    )
    assert body["tool_choice"] == {"type": "none"}
    assert [place for place, _, _ in anthropic_markers(body)] == ["system"]


@pytest.mark.parametrize(
    ("reason", "stop"),
    [
        ("end_turn", "end"),
        ("stop_sequence", "end"),
        ("pause_turn", "end"),
        ("max_tokens", "length"),
        ("tool_use", "tool_calls"),
        ("refusal", "refusal"),
        ("model_context_window_exceeded", "context"),
    ],
)
def test_anthropic_stop_reasons_as_stops(reason: str, stop: str) -> None:
    body = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": "partial"}],
        "stop_reason": reason,
    }
    assert anthropic_wire.from_response(body).stop == stop


def test_an_anthropic_refusal_without_text_is_an_answer_not_an_empty_reply() -> None:
    body = {
        "type": "message",
        "content": [],
        "stop_reason": "refusal",
        "stop_details": {"type": "refusal", "explanation": "policy"},
    }
    response = anthropic_wire.from_response(body)
    assert (response.stop, response.refusal, response.text) == ("refusal", "policy", "")


def test_an_openai_stream_cut_inside_a_tool_call_keeps_the_cut_call_and_says_length() -> None:
    state = openai_stream.StreamState()
    call = {"index": 0, "id": "c1", "type": "function"}
    for function in ({"name": "f", "arguments": '{"q": '}, {"arguments": '"lo'}):
        delta = {"tool_calls": [{**call, "function": function}]}
        state.feed({"choices": [{"index": 0, "delta": delta}]})
    state.feed({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})
    response = state.result()
    assert response.stop == "length"
    assert response.tool_calls[0].arguments == '{"q": "lo'

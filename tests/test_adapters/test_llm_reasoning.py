"""Reasoning on both wires: read from the providers' own bodies (fixtures under
tests/fixtures/llm/*/reasoning_*.json, with their sources), streamed and not, sent back by
each provider's one rule, the settings mapped to each provider's field, and the fakes'
refusals equal to the providers' recorded 400s."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from adapters.llm import anthropic_wire, openai_stream, openai_wire
from adapters.llm.dialects import (
    WireOptions,
    has_adaptive_thinking,
    reasoning_fields,
    tool_turn_messages,
)
from adapters.llm.provider_defaults import options_for
from bot.domain.messages import ChatMessage, Reasoning, ToolCall
from bot.ports import LLMRequest
from testkit.fake_reasoning import (
    ClaudeThinking,
    DeepSeekAnthropicThinking,
    DeepSeekThinking,
    GeminiThinking,
    Refusal,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "llm"


def fixture(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    assert loaded["source"]
    return loaded


CALL = ToolCall(id="call_1", name="inspect", arguments="{}")


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


def thought(text: str, fmt: str = "reasoning_content") -> Reasoning:
    return Reasoning(format=fmt, text=text)  # type: ignore[arg-type]


def tool_loop_then_chat() -> tuple[ChatMessage, ...]:
    """A tool turn (call, result, answer), a plain turn, and the current message."""
    return (
        ChatMessage(role="system", content="prompt"),
        user("q1"),
        ChatMessage(role="assistant", content="", tool_calls=(CALL,), reasoning=thought("r1")),
        ChatMessage(role="tool", content="ok", tool_call_id="call_1", name="inspect"),
        ChatMessage(role="assistant", content="a1", reasoning=thought("r2")),
        user("q2"),
        ChatMessage(role="assistant", content="a2", reasoning=thought("r3")),
        user("q3"),
    )


# ---------------------------------------------------------------- reading


@pytest.mark.parametrize(
    "name", ["deepseek/reasoning_tool_call.json", "ollama/reasoning_text.json"]
)
def test_text_reasoning_is_read_under_its_own_field(name: str) -> None:
    recorded = fixture(name)
    response = openai_wire.from_response(recorded["body"])
    assert response.reasoning == Reasoning(
        format=recorded["expected"]["format"], text=recorded["expected"]["text"]
    )
    assert recorded["expected"]["text"] not in response.text


def test_gemini_signatures_are_kept_by_tool_call() -> None:
    body = fixture("gemini/reasoning_tool_call.json")["body"]
    response = openai_wire.from_response(body)
    assert response.reasoning is not None
    assert response.reasoning.format == "gemini"
    signature = body["choices"][0]["message"]["tool_calls"][0]["extra_content"]["google"]
    assert json.loads(response.reasoning.payload) == {
        "function-call-4521990012": signature["thought_signature"]
    }


def test_anthropic_thinking_blocks_are_kept_whole_and_go_back_first_unchanged() -> None:
    body = fixture("anthropic/reasoning_thinking_tool_use.json")["body"]
    response = anthropic_wire.from_response(body)
    assert response.reasoning is not None
    assert json.loads(response.reasoning.payload) == body["content"][:2]
    assert response.reasoning.text == body["content"][0]["thinking"]
    request = LLMRequest(
        model="claude-opus-4-7",
        messages=(
            user("weather?"),
            ChatMessage(
                role="assistant",
                content="",
                tool_calls=response.tool_calls,
                reasoning=response.reasoning,
            ),
            ChatMessage(role="tool", content="sunny", tool_call_id=response.tool_calls[0].id),
        ),
    )
    sent = anthropic_wire.to_request(request)["messages"][1]["content"]
    assert sent[:2] == body["content"][:2]
    assert json.dumps(sent[:2]) == json.dumps(body["content"][:2])  # byte for byte
    assert sent[2]["type"] == "tool_use"


def test_a_streamed_anthropic_answer_keeps_the_same_blocks() -> None:
    body = fixture("anthropic/reasoning_thinking_tool_use.json")["body"]
    thinking, redacted, tool = body["content"]
    state = anthropic_wire.StreamState()
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {**body, "content": [], "stop_reason": None}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": thinking["thinking"][:20]},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": thinking["thinking"][20:]},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "signature_delta", "signature": thinking["signature"]},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": redacted},
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2, "content_block": {**tool, "input": {}}},
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": json.dumps(tool["input"])},
        },
        {"type": "content_block_stop", "index": 2},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {}},
        {"type": "message_stop"},
    ]
    for event in events:
        state.feed(event["type"], event)
    assert state.result().reasoning == anthropic_wire.from_response(body).reasoning


def test_streamed_reasoning_deltas_fold_into_the_message_reasoning() -> None:
    state = openai_stream.StreamState()
    chunks: list[dict[str, Any]] = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "reasoning_content": "Let "}}]},
        {"choices": [{"index": 0, "delta": {"reasoning_content": "me think."}}]},
        {"choices": [{"index": 0, "delta": {"content": "Hi"}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    grew = [state.feed(chunk) for chunk in chunks]
    assert grew == [False, False, True, False]  # the draft shows the answer, not the thinking
    response = state.result()
    assert response.text == "Hi"
    assert response.reasoning == thought("Let me think.")


def test_a_streamed_gemini_signature_rides_on_its_tool_call() -> None:
    state = openai_stream.StreamState()
    signature = {"google": {"thought_signature": "c2ln"}}
    state.feed(
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "fc1",
                                "type": "function",
                                "extra_content": signature,
                                "function": {"name": "get", "arguments": "{}"},
                            },
                        ]
                    },
                }
            ]
        }
    )
    reasoning = state.result().reasoning
    assert reasoning is not None
    assert json.loads(reasoning.payload) == {"fc1": "c2ln"}


# ---------------------------------------------------------------- sending back


def test_tool_turns_are_the_assistant_messages_between_users_around_a_call() -> None:
    assert tool_turn_messages(tool_loop_then_chat()) == frozenset({2, 4})


def test_text_reasoning_goes_back_on_tool_turns_only() -> None:
    body = openai_wire.to_request(LLMRequest(model="m", messages=tool_loop_then_chat()))
    assistants = [m for m in body["messages"] if m["role"] == "assistant"]
    assert [m.get("reasoning_content") for m in assistants] == ["r1", "r2", None]


def test_deepseek_gets_an_empty_reasoning_on_a_tool_turn_that_has_none() -> None:
    """A tool turn stored before reasoning was kept (or by another model) would make
    DeepSeek refuse every later call; an empty field is what it takes."""
    messages = tuple(
        ChatMessage(
            role=m.role, content=m.content, tool_calls=m.tool_calls, tool_call_id=m.tool_call_id
        )
        for m in tool_loop_then_chat()
    )
    deepseek = options_for("https://api.deepseek.com")
    body = openai_wire.to_request(
        LLMRequest(model="deepseek-v4-flash", messages=messages), deepseek
    )
    assistants = [m for m in body["messages"] if m["role"] == "assistant"]
    assert [m.get("reasoning_content") for m in assistants] == ["", "", None]
    other = openai_wire.to_request(LLMRequest(model="m", messages=messages))
    assert all("reasoning_content" not in m for m in other["messages"])


def test_gemini_signatures_go_back_on_every_turn() -> None:
    signed = Reasoning(format="gemini", payload=json.dumps({"call_1": "c2ln"}))
    old = ChatMessage(role="assistant", content="", tool_calls=(CALL,), reasoning=signed)
    messages = (
        user("q1"),
        old,
        ChatMessage(role="tool", content="ok", tool_call_id="call_1"),
        ChatMessage(role="assistant", content="a1"),
        user("q2"),
    )
    body = openai_wire.to_request(LLMRequest(model="gemini-3-flash-preview", messages=messages))
    call = body["messages"][1]["tool_calls"][0]
    assert call["extra_content"] == {"google": {"thought_signature": "c2ln"}}


def test_a_signature_goes_back_only_to_the_model_that_made_it() -> None:
    """After `/model` switches a chat, the other model never gets a signature it did not
    make (it would refuse it); the model that made it still gets it."""
    body = fixture("anthropic/reasoning_thinking_tool_use.json")["body"]
    made = anthropic_wire.from_response(body)
    assert made.reasoning is not None
    kept = dataclasses.replace(made.reasoning, model="claude-opus-4-7")
    history = (
        user("weather?"),
        ChatMessage(role="assistant", content="", tool_calls=made.tool_calls, reasoning=kept),
        ChatMessage(role="tool", content="sunny", tool_call_id=made.tool_calls[0].id),
        ChatMessage(role="assistant", content="Sunny."),
        user("and tomorrow?"),
    )

    def sent_types(model: str) -> list[str]:
        wire = anthropic_wire.to_request(LLMRequest(model=model, messages=history))
        return [block["type"] for block in wire["messages"][1]["content"]]

    assert sent_types("claude-opus-4-7")[:2] == ["thinking", "redacted_thinking"]
    assert sent_types("claude-sonnet-4-6") == ["tool_use"]
    signed = Reasoning(format="gemini", payload=json.dumps({"call_1": "c2ln"}), model="gemini-3")
    calls = (
        user("q1"),
        ChatMessage(role="assistant", content="", tool_calls=(CALL,), reasoning=signed),
        ChatMessage(role="tool", content="ok", tool_call_id="call_1"),
        user("q2"),
    )
    other = openai_wire.to_request(LLMRequest(model="gemini-3-pro", messages=calls))
    assert "extra_content" not in other["messages"][1]["tool_calls"][0]
    # text reasoning carries no signature: it goes back whoever made it
    text = Reasoning(format="reasoning_content", text="r1", model="deepseek-v4-pro")
    plain = (calls[0], dataclasses.replace(calls[1], reasoning=text), *calls[2:])
    flash = openai_wire.to_request(LLMRequest(model="deepseek-v4-flash", messages=plain))
    assert flash["messages"][1]["reasoning_content"] == "r1"


def test_the_same_history_is_written_the_same_way_on_every_call() -> None:
    request = LLMRequest(model="m", messages=tool_loop_then_chat())
    first = json.dumps(openai_wire.to_request(request))
    assert json.dumps(openai_wire.to_request(request)) == first
    longer = LLMRequest(
        model="m",
        messages=(*tool_loop_then_chat(), ChatMessage(role="assistant", content="a3"), user("q4")),
    )
    head = json.dumps(openai_wire.to_request(longer)["messages"][:7])
    assert head == json.dumps(json.loads(first)["messages"][:7])


# ---------------------------------------------------------------- settings


@pytest.mark.parametrize(
    ("url", "kind", "model", "level", "fields"),
    [
        (
            "https://api.anthropic.com",
            "anthropic",
            "claude-opus-4-7",
            "high",
            {"thinking": {"type": "adaptive"}, "output_config": {"effort": "high"}},
        ),
        (
            "https://api.anthropic.com",
            "anthropic",
            "claude-sonnet-4-5-20250929",
            "low",
            {"thinking": {"type": "enabled", "budget_tokens": 2048}},
        ),
        (
            "https://api.anthropic.com",
            "anthropic",
            "claude-opus-4-7",
            "off",
            {"thinking": {"type": "disabled"}},
        ),
        ("https://api.anthropic.com", "anthropic", "claude-opus-4-7", "auto", {}),
        (
            "https://api.deepseek.com",
            "openai",
            "deepseek-v4-flash",
            "medium",
            {"thinking": {"type": "enabled"}, "reasoning_effort": "high"},
        ),
        (
            "https://api.deepseek.com",
            "openai",
            "deepseek-v4-flash",
            "off",
            {"thinking": {"type": "disabled"}},
        ),
        (
            "https://api.deepseek.com/anthropic",
            "anthropic",
            "deepseek-v4-pro",
            "max",
            {"thinking": {"type": "enabled"}, "output_config": {"effort": "max"}},
        ),
        ("https://api.openai.com/v1", "openai", "gpt-5.5", "max", {"reasoning_effort": "xhigh"}),
        ("https://api.openai.com/v1", "openai", "gpt-4.1", "high", {}),
        ("https://openrouter.ai/api/v1", "openai", "x/y", "low", {"reasoning": {"effort": "low"}}),
        ("http://localhost:11434/v1", "openai", "qwen3:8b", "off", {"reasoning_effort": "none"}),
    ],
    ids=[
        "claude-adaptive",
        "claude-4.5-budget",
        "claude-off",
        "claude-auto",
        "deepseek-medium",
        "deepseek-off",
        "deepseek-anthropic-max",
        "openai-max",
        "gpt-4.1-nothing",
        "openrouter",
        "ollama-off",
    ],
)
def test_each_level_goes_out_in_the_providers_own_field(
    url: str, kind: str, model: str, level: str, fields: dict[str, Any]
) -> None:
    options = options_for(url, kind=kind, reasoning=level)  # type: ignore[arg-type]
    assert dict(reasoning_fields(options, model).fields) == fields


def test_a_token_budget_raises_max_tokens_and_thinking_drops_temperature() -> None:
    options = options_for("https://api.anthropic.com", kind="anthropic", reasoning="high")
    request = LLMRequest(
        model="claude-sonnet-4-5",
        messages=(user("hi"),),
        max_output_tokens=1000,
        temperature=0.3,
    )
    body = anthropic_wire.to_request(request, options)
    assert body["max_tokens"] == 1000 + 16384
    assert "temperature" not in body
    cool = anthropic_wire.to_request(request, options_for("https://api.anthropic.com"))
    assert cool["temperature"] == 0.3


def test_extra_body_is_merged_last_table_by_table() -> None:
    options = WireOptions(
        reasoning="high",
        reasoning_dialect="deepseek",
        extra_body={"thinking": {"budget": 9}, "top_k": 3},
    )
    body = openai_wire.to_request(LLMRequest(model="m", messages=(user("hi"),)), options)
    assert body["thinking"] == {"type": "enabled", "budget": 9}
    assert body["top_k"] == 3


# ---------------------------------------------------------------- the fakes' refusals


def _refused(rule: Any, body: dict[str, Any]) -> Refusal:
    with pytest.raises(Refusal) as caught:
        rule.check(body)
    return caught.value


def test_deepseek_refuses_a_tool_turn_without_its_reasoning_as_deepseek_does() -> None:
    recorded = fixture("deepseek/reasoning_missing_400.json")
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    body = {
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ]
    }
    refusal = _refused(DeepSeekThinking(), body)
    assert (refusal.status, refusal.body) == (recorded["status"], recorded["body"])
    body["messages"][1]["reasoning_content"] = "anything"
    DeepSeekThinking().check(body)


def test_deepseeks_anthropic_endpoint_refuses_a_tool_turn_without_thinking() -> None:
    recorded = fixture("deepseek/reasoning_anthropic_missing_400.json")
    body = {
        "messages": [
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
            },
        ]
    }
    refusal = _refused(DeepSeekAnthropicThinking(), body)
    assert (refusal.status, refusal.body) == (recorded["status"], recorded["body"])


def test_claude_refuses_a_loop_without_its_thinking_and_an_altered_signature() -> None:
    claude = ClaudeThinking()
    answer: dict[str, Any] = {
        "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]
    }
    thinking_on = {"thinking": {"type": "adaptive"}}
    claude.think(answer, thinking_on)
    tool_result = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
    }
    body = {
        **thinking_on,
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": answer["content"]},
            tool_result,
        ],
    }
    claude.check(body)
    stripped = {
        **body,
        "messages": [
            body["messages"][0],
            {"role": "assistant", "content": answer["content"][1:]},
            tool_result,
        ],
    }
    recorded = fixture("anthropic/reasoning_not_first_400.json")
    assert _refused(claude, stripped).body == recorded["body"]
    altered = json.loads(json.dumps(body))
    altered["messages"][1]["content"][0]["thinking"] += " "
    assert (
        _refused(claude, altered).body
        == fixture("anthropic/reasoning_bad_signature_400.json")["body"]
    )


def test_gemini_refuses_a_current_turn_call_without_its_signature() -> None:
    gemini = GeminiThinking()
    answer = {
        "choices": [
            {
                "message": {
                    "tool_calls": [
                        {
                            "id": "fc1",
                            "type": "function",
                            "function": {"name": "mcp_everything_echo", "arguments": "{}"},
                        },
                    ]
                }
            }
        ]
    }
    gemini.think(answer, {})
    call = answer["choices"][0]["message"]["tool_calls"][0]
    stripped = {k: v for k, v in call.items() if k != "extra_content"}
    body = {
        "messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": None, "tool_calls": [stripped]},
            {"role": "tool", "tool_call_id": "fc1", "content": "ok"},
        ]
    }
    recorded = fixture("gemini/reasoning_missing_400.json")
    refusal = _refused(gemini, body)
    assert (refusal.status, refusal.body) == (recorded["status"], recorded["body"])
    body["messages"][2]["tool_calls"] = [call]
    gemini.check(body)
    gemini.check(
        {
            "messages": [
                *body["messages"][:2],
                body["messages"][2] | {"tool_calls": [stripped]},
                body["messages"][3],
                {"role": "user", "content": "later"},
            ]
        }
    )


@pytest.mark.parametrize(
    ("model", "adaptive"),
    [
        ("claude-opus-4-7", True),
        ("claude-opus-4-6@20260101", True),
        ("claude-opus-5", True),
        ("claude-sonnet-4-5-20250929", False),
        ("claude-sonnet-4-20250514", False),
        ("claude-3-7-sonnet-20250219", False),
        ("claude-haiku-4-5", False),
        ("my-proxy-model", True),
    ],
)
def test_claude_46_and_later_think_adaptively_older_ones_on_a_budget(
    model: str, adaptive: bool
) -> None:
    assert has_adaptive_thinking(model) is adaptive

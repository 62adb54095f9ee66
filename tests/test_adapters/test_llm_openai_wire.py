"""The pure OpenAI wire mapping, on recorded JSON bodies."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.llm.openai_server_wire import from_request
from adapters.llm.openai_wire import from_response, to_request
from adapters.llm.provider_errors import classify_error, retry_after_seconds
from bot.domain.messages import ChatMessage, ImagePart, ToolCall
from bot.errors import (
    ContextOverflow,
    ProviderBadResponse,
    ProviderRateLimited,
    ProviderRejected,
    ProviderUnavailable,
)
from bot.ports import LLMRequest, LLMResponse, ToolSpec, Usage
from testkit.openai_answers import to_response

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "llm"


def load(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


SEARCH = ToolSpec(
    name="search_notes",
    description="Search the notes.",
    parameters={"type": "object", "properties": {"query": {"type": "string"}}},
)

CONVERSATION = (
    ChatMessage(role="system", content="You are helpful."),
    ChatMessage(role="user", content="[id:m1;user:Ann;user_id:1;]\nhi", tokens=9),
    ChatMessage(
        role="user", content="look", images=(ImagePart(url="https://x/y.png"),), continues_turn=True
    ),
    ChatMessage(
        role="assistant",
        tool_calls=(ToolCall(id="c1", name="search_notes", arguments='{"query":"hi"}'),),
    ),
    ChatMessage(role="tool", content="nothing", tool_call_id="c1", name="search_notes"),
    ChatMessage(role="assistant", content="Nothing found.", is_breadcrumb=True),
)


def test_to_request_maps_every_message_shape() -> None:
    request = LLMRequest(
        model="gpt-4o",
        messages=CONVERSATION,
        tools=(SEARCH,),
        max_output_tokens=500,
        temperature=0.2,
    )
    assert to_request(request) == {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": "[id:m1;user:Ann;user_id:1;]\nhi"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
                ],
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "search_notes", "arguments": '{"query":"hi"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "nothing"},
            {"role": "assistant", "content": "Nothing found."},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "search_notes",
                    "description": "Search the notes.",
                    "parameters": SEARCH.parameters,
                },
            }
        ],
        "max_tokens": 500,
        "temperature": 0.2,
    }


def test_to_request_omits_unset_options_and_private_fields() -> None:
    body = to_request(LLMRequest(model="m", messages=CONVERSATION))
    assert set(body) == {"model", "messages"}
    private = {"is_breadcrumb", "continues_turn", "tokens", "is_error", "images", "name"}
    assert all(private.isdisjoint(m) for m in body["messages"])


def test_to_request_gives_a_tool_without_schema_an_empty_object_schema() -> None:
    body = to_request(
        LLMRequest(model="m", messages=(), tools=(ToolSpec(name="now", description="Time."),))
    )
    assert body["tools"][0]["function"]["parameters"] == {"type": "object", "properties": {}}


def test_request_round_trips_through_the_server_side_mapping() -> None:
    request = LLMRequest(
        model="gpt-4o", messages=CONVERSATION, tools=(SEARCH,), max_output_tokens=64
    )
    back = from_request(json.loads(json.dumps(to_request(request))))
    strip = [
        ChatMessage(
            role=m.role,
            content=m.content,
            tool_calls=m.tool_calls,
            tool_call_id=m.tool_call_id,
            name=m.name,
            images=m.images,
        )
        for m in CONVERSATION
    ]
    assert back == LLMRequest(
        model="gpt-4o", messages=tuple(strip), tools=(SEARCH,), max_output_tokens=64
    )


_text = st.text(max_size=40)
_calls = st.lists(
    st.builds(
        ToolCall,
        id=st.text(min_size=1, max_size=8),
        name=st.text(min_size=1, max_size=8),
        arguments=_text,
    ),
    max_size=3,
).map(tuple)


@given(
    st.lists(
        st.one_of(
            st.builds(ChatMessage, role=st.sampled_from(["system", "user"]), content=_text),
            st.builds(ChatMessage, role=st.just("assistant"), content=_text, tool_calls=_calls),
            st.builds(
                ChatMessage, role=st.just("tool"), content=_text, tool_call_id=st.text(max_size=8)
            ),
        ),
        max_size=6,
    )
)
def test_any_conversation_survives_the_round_trip(messages: list[ChatMessage]) -> None:
    request = LLMRequest(model="m", messages=tuple(messages))
    back = from_request(json.loads(json.dumps(to_request(request))))
    assert [(m.role, m.content, m.tool_calls, m.tool_call_id) for m in back.messages] == [
        (m.role, m.content, m.tool_calls, m.tool_call_id if m.role == "tool" else None)
        for m in messages
    ]


def test_from_response_reads_parallel_tool_calls_and_cached_usage() -> None:
    response = from_response(load("openai_tool_calls.json"))
    assert response == LLMResponse(
        text="",
        tool_calls=(
            ToolCall(
                id="call_8fJ2kLmN0pQrStUv", name="delete_message", arguments='{"message_id":"m7"}'
            ),
            ToolCall(
                id="call_3aB4cD5eF6gH7iJ8",
                name="set_reaction",
                arguments='{"message_id":"m9","emoji":"👍"}',
            ),
        ),
        usage=Usage(input_tokens=2417, output_tokens=58, cached_tokens=1920),
        finish_reason="tool_calls",
        model="gpt-4o-2024-08-06",
        stop="tool_calls",
    )


def test_from_response_reads_text() -> None:
    response = from_response(load("openai_text.json"))
    assert response.text == "We moved the meeting to Friday at 10:00."
    assert response.usage == Usage(input_tokens=812, output_tokens=14, cached_tokens=0)
    assert response.finish_reason == "stop"


def test_from_response_reads_deepseek_cache_hits() -> None:
    response = from_response(load("deepseek_cache_hit.json"))
    assert response.usage == Usage(input_tokens=9731, output_tokens=21, cached_tokens=8960)
    assert response.model == "deepseek-chat"
    assert response.text.startswith("好的")


def test_from_response_without_usage_has_none() -> None:
    body = load("openai_text.json")
    del body["usage"]
    assert from_response(body).usage is None


def test_from_response_accepts_object_arguments_and_missing_ids() -> None:
    call = {"function": {"name": "f", "arguments": {"a": 1}}}
    body = {"choices": [{"message": {"tool_calls": [call]}}]}
    assert from_response(body).tool_calls == (
        ToolCall(id="call_0", name="f", arguments='{"a": 1}'),
    )


def _with_message(message: object) -> dict[str, Any]:
    return {"choices": [{"message": message, "finish_reason": "stop"}]}


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ([], "not an object"),
        ({}, "no choices"),
        ({"choices": []}, "no choices"),
        ({"choices": ["x"]}, "no message"),
        (_with_message({"content": 5}), "content is int"),
        (_with_message({"content": None}), "empty reply"),
        (_with_message({"content": ""}), "empty reply"),
        (_with_message({"content": "x", "tool_calls": {"id": "c"}}), "not a list"),
        (_with_message({"tool_calls": [{"function": {"arguments": "{}"}}]}), "has no name"),
        (_with_message({"tool_calls": [{"function": {"name": ""}}]}), "has no name"),
        (_with_message({"tool_calls": [{"id": "c"}]}), "no function"),
        (_with_message({"tool_calls": [{"function": {"name": "f", "arguments": 3}}]}), "text"),
        ({**_with_message({"content": "x"}), "usage": {"prompt_tokens": "9"}}, "not a count"),
        ({**_with_message({"content": "x"}), "usage": []}, "not an object"),
    ],
    ids=[
        "list",
        "empty-object",
        "empty-choices",
        "choice-not-object",
        "content-int",
        "content-null",
        "content-empty",
        "tool-calls-object",
        "call-without-name",
        "call-empty-name",
        "call-without-function",
        "arguments-number",
        "usage-string",
        "usage-list",
    ],
)
def test_from_response_rejects_malformed_bodies(body: object, reason: str) -> None:
    with pytest.raises(ProviderBadResponse, match=reason):
        from_response(body)


OVERFLOW = load("openai_context_overflow.json")
RATE_LIMIT = load("rate_limit_429.json")


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (OVERFLOW["status"], OVERFLOW["body"], ContextOverflow),
        (400, {"error": {"message": "x", "code": "context_length_exceeded"}}, ContextOverflow),
        (
            400,
            {"error": {"message": "prompt is too long: 210000 tokens > 200000 maximum"}},
            ContextOverflow,
        ),
        (
            400,
            {"error": {"message": "Input exceeds the CONTEXT WINDOW of this model"}},
            ContextOverflow,
        ),
        (413, "Too many tokens in request", ContextOverflow),
        (400, '{"detail": "This model\'s maximum context length is 8192 tokens"}', ContextOverflow),
        (429, RATE_LIMIT["body"], ProviderRateLimited),
        (429, {"error": {"message": "too many tokens per minute"}}, ProviderRateLimited),
        (500, {"error": {"message": "internal"}}, ProviderUnavailable),
        (502, "<html>Bad Gateway</html>", ProviderUnavailable),
        (503, "", ProviderUnavailable),
        (400, {"error": {"message": "Invalid value for 'temperature'"}}, ProviderRejected),
        (
            401,
            {"error": {"message": "Incorrect API key provided: sk-***abcd."}},
            ProviderRejected,
        ),
        (404, {"error": "model not found"}, ProviderRejected),
    ],
    ids=[
        "openai-overflow-fixture",
        "overflow-code",
        "anthropic-style-prompt-too-long",
        "context-window-any-case",
        "plain-text-too-many-tokens",
        "detail-max-context",
        "429-fixture",
        "429-tpm-is-not-overflow",
        "500",
        "502-html",
        "503-empty",
        "400-other",
        "401",
        "404-string-error",
    ],
)
def test_classify_error(status: int, body: dict[str, Any] | str, expected: type) -> None:
    assert type(classify_error(status, body, {})) is expected


def test_classify_error_keeps_the_provider_message() -> None:
    error = classify_error(400, {"error": {"message": "Invalid value for 'temperature'"}})
    assert str(error) == "HTTP 400: Invalid value for 'temperature'"
    assert str(classify_error(502, "x" * 1000)).endswith("…")
    assert len(str(classify_error(502, "x" * 1000))) < 320


def test_classify_error_reads_retry_after_from_the_429_fixture() -> None:
    error = classify_error(RATE_LIMIT["status"], RATE_LIMIT["body"], RATE_LIMIT["headers"])
    assert isinstance(error, ProviderRateLimited)
    assert error.retry_after == 7.0
    assert isinstance(classify_error(429, {}, None), ProviderRateLimited)
    assert classify_error(429, {}, None).retry_after is None  # type: ignore[attr-defined]


NOW = datetime(2026, 11, 29, 14, 3, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "12"}, 12.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"Retry-After": "Sun, 29 Nov 2026 14:03:30 GMT"}, 30.0),
        ({"Retry-After": "Sun, 29 Nov 2026 14:00:00 GMT"}, 0.0),
        ({"Retry-After": "-3"}, 0.0),
        ({"Retry-After": "soon"}, None),
        ({}, None),
    ],
    ids=["seconds", "fraction", "ms-wins", "http-date", "date-in-past", "negative", "junk", "none"],
)
def test_retry_after_seconds(headers: dict[str, str], expected: float | None) -> None:
    assert retry_after_seconds(headers, now=NOW) == expected


def test_to_response_is_read_back_by_from_response() -> None:
    response = LLMResponse(
        text="hi",
        tool_calls=(ToolCall(id="c", name="f", arguments="{}"),),
        usage=Usage(input_tokens=10, output_tokens=2, cached_tokens=8),
        model="x",
    )
    back = from_response(to_response(response, model="ignored"))
    assert back == LLMResponse(
        text="hi",
        tool_calls=response.tool_calls,
        usage=response.usage,
        finish_reason="tool_calls",
        model="x",
        stop="tool_calls",
    )


@pytest.mark.parametrize(
    "body",
    [
        [],
        {"messages": {}},
        {"messages": [{"role": "robot"}]},
        {"messages": [{"role": "user", "content": 3}]},
        {"messages": [{"role": "user", "content": ["x"]}]},
        {"messages": [], "tools": [{"function": {}}]},
        {"messages": [{"role": "assistant", "tool_calls": [{"function": {}}]}]},
    ],
    ids=[
        "list",
        "messages-object",
        "unknown-role",
        "content-int",
        "part-string",
        "tool-no-name",
        "call-no-name",
    ],
)
def test_from_request_rejects_malformed_bodies(body: object) -> None:
    with pytest.raises(ValueError, match=r"."):
        from_request(body)


_CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}


def _answer(finish: str | None, **message: object) -> dict[str, object]:
    return {
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
        ]
    }


@pytest.mark.parametrize(
    ("finish", "message", "stop"),
    [
        ("stop", {"content": "hi"}, "end"),
        ("length", {"content": '{"'}, "length"),
        ("length", {"content": None}, "length"),  # the limit spent thinking: no text at all
        ("tool_calls", {"tool_calls": [_CALL]}, "tool_calls"),
        ("stop", {"tool_calls": [_CALL]}, "tool_calls"),  # Ollama says stop
        ("content_filter", {"content": "Here is how to"}, "refusal"),
        ("stop", {"content": None, "refusal": "I can't help with that."}, "refusal"),
        (None, {"content": "hi"}, None),
        ("insufficient_system_resource", {"content": "hi"}, None),
    ],
    ids=[
        "stop",
        "length",
        "length-empty",
        "tool_calls",
        "tool-calls-said-stop",
        "content_filter",
        "refusal-field",
        "unreported",
        "unknown",
    ],
)
def test_finish_reasons_as_stops(finish: str | None, message: dict[str, object], stop: str) -> None:
    assert from_response(_answer(finish, **message)).stop == stop

"""Issue 50, items 7 and 8: OpenRouter's `reasoning_details` go back unmodified, its
upstream error reaches the operator's error line, and Gemini's signature on a text-only
reply is kept.

Against the fake OpenAI server answering with bodies shaped as OpenRouter documents them
(openrouter.ai/docs/use-cases/reasoning-tokens, "Preserving reasoning blocks"; its 400 for a
Gemini 3 tool loop without them is quoted in public issues): the first answer carries the
details with a tool call, the tool loop's next request must carry them back byte for byte,
through storage too.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from adapters.llm.openai_provider import OpenAIProvider
from bot.domain.messages import ChatMessage
from bot.domain.records import AssistantRecord
from bot.errors import ProviderRejected
from bot.ports import LLMRequest, ToolSpec
from storage.codec import decode_payload, encode_payload
from testkit.fake_server import FakeOpenAIServer

TOOLS = (ToolSpec(name="search", description="Search.", parameters={"type": "object"}),)
DETAILS: list[dict[str, Any]] = [
    {"type": "reasoning.text", "text": "Look it up first.", "format": "google-gemini-v1",
     "index": 0},
    {"type": "reasoning.encrypted", "data": "CiQBjz1rX8+sig/nature==", "id": "tool_search_1",
     "format": "google-gemini-v1", "index": 1},
]  # fmt: skip


def answer_with_details() -> dict[str, Any]:
    return {
        "id": "gen-1",
        "model": "google/gemini-3-pro-preview",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": "",
                    "reasoning": "Look it up first.",
                    "reasoning_details": DETAILS,
                    "tool_calls": [
                        {
                            "id": "tool_search_1",
                            "type": "function",
                            "function": {"name": "search", "arguments": '{"q":"rollout"}'},
                        }
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30},
    }


def streamed_details() -> str:
    """The same answer as OpenRouter streams it: the details in pieces by index."""
    chunks = [
        {"reasoning_details": [{**DETAILS[0], "text": "Look it up "}]},
        {"reasoning_details": [{"type": "reasoning.text", "text": "first.", "index": 0}]},
        {"reasoning_details": [DETAILS[1]]},
        {"tool_calls": [{"index": 0, "id": "tool_search_1", "type": "function",
                         "function": {"name": "search", "arguments": '{"q":"rollout"}'}}]},
    ]  # fmt: skip
    lines = [
        "data: "
        + json.dumps({"id": "gen-1", "model": "m", "choices": [{"index": 0, "delta": delta}]})
        for delta in chunks
    ]
    finish = {"id": "gen-1", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
    lines += ["data: " + json.dumps(finish), "data: [DONE]"]
    return "\n\n".join(lines) + "\n\n"


async def on_text(_: str) -> None:
    return None


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_reasoning_details_go_back_unmodified(stream: bool) -> None:
    question = ChatMessage(role="user", content="how is the rollout?")
    first = LLMRequest(model="google/gemini-3-pro-preview", messages=(question,), tools=TOOLS)
    async with (
        FakeOpenAIServer() as server,
        OpenAIProvider(server.base_url, "k", max_retries=0) as provider,
    ):
        if stream:
            server.answer_next(streamed_details(), stream=True)
            response = await provider.complete(first, on_text=on_text)
        else:
            server.answer_next(answer_with_details())
            response = await provider.complete(first)
        assert response.reasoning is not None
        # kept with the assistant record, through storage
        stored = AssistantRecord(
            text=response.text, tool_calls=response.tool_calls, reasoning=response.reasoning
        )
        kept, _ = decode_payload(encode_payload(stored, ()))
        assert isinstance(kept, AssistantRecord)
        call = response.tool_calls[0]
        loop = (
            question,
            ChatMessage(role="assistant", content="", tool_calls=(call,),
                        reasoning=kept.reasoning),
            ChatMessage(role="tool", content="on track", tool_call_id=call.id),
        )  # fmt: skip
        await provider.complete(replace_messages(first, loop))
    sent = server.requests[-1]["messages"][1]
    assert sent["reasoning_details"] == DETAILS


def replace_messages(request: LLMRequest, messages: tuple[ChatMessage, ...]) -> LLMRequest:
    return replace(request, messages=messages)


async def test_openrouters_upstream_error_reaches_the_error_line() -> None:
    raw = '{"error":{"code":400,"message":"Function call is missing a thought_signature"}}'
    body = {"error": {"code": 400, "message": "Provider returned error",
                      "metadata": {"raw": raw, "provider_name": "Google AI Studio"}}}  # fmt: skip
    request = LLMRequest(model="m", messages=(ChatMessage(role="user", content="hi"),))
    async with FakeOpenAIServer() as server:
        server.fail_next(400, body)
        async with OpenAIProvider(server.base_url, "k", max_retries=0) as provider:
            with pytest.raises(ProviderRejected) as refused:
                await provider.complete(request)
    assert "missing a thought_signature" in str(refused.value)
    assert "Provider returned error" in str(refused.value)


async def test_geminis_signature_on_a_text_only_reply_is_kept() -> None:
    """Issue 50, item 8: Gemini signs a text-only reply on the message itself
    (`extra_content.google.thought_signature`); the next request gives it back there."""
    question = ChatMessage(role="user", content="and the weather?")
    request = LLMRequest(model="gemini-3-pro-preview", messages=(question,))
    body = {
        "model": "gemini-3-pro-preview",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {
                    "role": "assistant",
                    "content": "Sunny.",
                    "extra_content": {"google": {"thought_signature": "CmQBsignedText=="}},
                },
            }
        ],
    }
    async with (
        FakeOpenAIServer() as server,
        OpenAIProvider(server.base_url, "k", max_retries=0) as provider,
    ):
        server.answer_next(body)
        response = await provider.complete(request)
        history = (
            question,
            ChatMessage(role="assistant", content="Sunny.", reasoning=response.reasoning),
            ChatMessage(role="user", content="thanks"),
        )
        await provider.complete(replace(request, messages=history))
    sent = server.requests[-1]["messages"][1]
    assert sent["extra_content"] == {"google": {"thought_signature": "CmQBsignedText=="}}

"""Images on both wires: the current message's as image parts, a viewed image inside its
Anthropic `tool_result`, or on a user message after the tool results in chat completions
(added after the cache breakpoints are placed, so they stay on the messages the plan named)."""

from __future__ import annotations

import json

from adapters.llm import anthropic_wire, openai_wire
from adapters.llm.provider_defaults import options_for
from bot.domain.messages import CachePlan, ChatMessage, ImagePart, ToolCall
from bot.ports import LLMRequest
from testkit import anthropic_server_wire

JPEG = ImagePart(url="data:image/jpeg;base64,/9j/AA==", width=1024, height=768, label="m3")
CALL = ToolCall(id="c1", name="view_image", arguments='{"reference": "m3"}')
MESSAGES = (
    ChatMessage(role="system", content="rules"),
    ChatMessage(role="user", content="[id:m3;user_id:1;]\n[图片]"),
    ChatMessage(role="assistant", content="[id:m4;]\nnice"),
    ChatMessage(role="user", content="[id:m5;user_id:1;]\nwhat was in m3?"),
    ChatMessage(role="assistant", content="", tool_calls=(CALL,)),
    ChatMessage(role="tool", content="[image m3 viewed] (1024x768, attached)", tool_call_id="c1",
                name="view_image", images=(JPEG,)),
)  # fmt: skip
REQUEST = LLMRequest(
    model="m",
    messages=MESSAGES,
    cache_plan=CachePlan(system_end=0, window_head=1, last_stable=2),
)


def test_chat_completions_carries_a_viewed_image_on_a_user_message_after_the_results() -> None:
    body = openai_wire.to_request(REQUEST, options_for("https://openrouter.ai/api/v1"))
    wire = body["messages"]
    assert [m["role"] for m in wire] == [
        "system", "user", "assistant", "user", "assistant", "tool", "user"
    ]  # fmt: skip
    assert wire[5]["content"] == "[image m3 viewed] (1024x768, attached)"
    assert wire[6]["content"] == [
        {"type": "text", "text": "[Images from tool results] m3"},
        {"type": "image_url", "image_url": {"url": JPEG.url}},
    ]
    marked = [i for i, m in enumerate(wire) if "cache_control" in json.dumps(m)]
    assert marked == [0, 1, 2]  # the plan's messages, not shifted by the carrier


def test_anthropic_puts_a_viewed_image_inside_its_tool_result() -> None:
    body = anthropic_wire.to_request(REQUEST)
    result = body["messages"][-1]["content"][0]
    assert result["type"] == "tool_result"
    assert result["content"] == [
        {"type": "text", "text": "[image m3 viewed] (1024x768, attached)"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg",
                                     "data": "/9j/AA=="}},
    ]  # fmt: skip
    back = anthropic_server_wire.from_request(body)
    tool = next(m for m in back.messages if m.role == "tool")
    assert [i.url for i in tool.images] == [JPEG.url]


def test_the_current_messages_images_follow_its_text_on_both_wires() -> None:
    current = ChatMessage(role="user", content="look", images=(JPEG,))
    request = LLMRequest(model="m", messages=(current,))
    (openai,) = openai_wire.to_request(request)["messages"]
    assert openai["content"][1] == {"type": "image_url", "image_url": {"url": JPEG.url}}
    (anthropic,) = anthropic_wire.to_request(request)["messages"]
    assert anthropic["content"][1]["source"]["media_type"] == "image/jpeg"

"""Issue 50, item 8: Claude's interleaved thinking goes back in the order it came.

With interleaved thinking a Messages answer may think, write, think again, then call a
tool (docs.claude.com, "Interleaved thinking"); the tool loop's next request must give the
blocks back unchanged, in that order (it used to send thinking, thinking, text). Against
the fake Anthropic server answering with a body of that shape.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from adapters.llm.anthropic_provider import AnthropicProvider
from bot.domain.messages import ChatMessage
from bot.ports import LLMRequest, ToolSpec
from testkit.fake_anthropic import FakeAnthropicServer

KEY = "sk-ant-test-key"
TOOLS = (ToolSpec(name="search", description="Search.", parameters={"type": "object"}),)
FIRST = {"type": "thinking", "thinking": "The member wants the status.", "signature": "EqQBsig1"}
SECOND = {"type": "thinking", "thinking": "Search for the rollout.", "signature": "EqQBsig2"}


def interleaved_answer() -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [
            FIRST,
            {"type": "text", "text": "Let me check."},
            SECOND,
            {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "rollout"}},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 30, "output_tokens": 20},
    }


async def test_interleaved_thinking_goes_back_in_the_order_it_came() -> None:
    question = ChatMessage(role="user", content="how is the rollout?")
    first = LLMRequest(
        model="claude-sonnet-4-5", messages=(question,), tools=TOOLS, max_output_tokens=500
    )
    async with (
        FakeAnthropicServer(api_key=KEY) as server,
        AnthropicProvider(server.base_url, KEY, max_retries=0) as provider,
    ):
        server.answer_next(interleaved_answer())
        response = await provider.complete(first)
        call = response.tool_calls[0]
        loop = (
            question,
            ChatMessage(
                role="assistant",
                content=response.text,
                tool_calls=(call,),
                reasoning=response.reasoning,
            ),
            ChatMessage(role="tool", content="on track", tool_call_id=call.id),
        )
        await provider.complete(replace(first, messages=loop))
    sent = server.requests[-1]["messages"][1]["content"]
    assert [block["type"] for block in sent] == ["thinking", "text", "thinking", "tool_use"]
    assert sent[0] == FIRST
    assert sent[2] == SECOND

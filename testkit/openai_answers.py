"""The answers of the OpenAI chat-completions wire, for the fake server: an `LLMResponse` or
an error written as OpenAI would (`to_response`, `error_body`); reading a request body back
is `adapters.llm.openai_server_wire.from_request` (the dashboard uses it too).
"""

from __future__ import annotations

from adapters.llm.dialects import gemini_signatures
from adapters.llm.openai_wire import JSON
from bot.ports import LLMResponse


def to_response(response: LLMResponse, *, model: str, response_id: str = "chatcmpl-fake") -> JSON:
    """A chat-completions body carrying `response` (OpenAI's usage shape)."""
    message: JSON = {"role": "assistant", "content": response.text or None}
    reasoning = response.reasoning
    if reasoning is not None and reasoning.text and reasoning.format != "anthropic":
        key = "reasoning" if reasoning.format == "reasoning" else "reasoning_content"
        message[key] = reasoning.text
    signatures = gemini_signatures(reasoning)
    if response.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in response.tool_calls
        ]
        for call in message["tool_calls"]:
            if call["id"] in signatures:
                call["extra_content"] = {"google": {"thought_signature": signatures[call["id"]]}}
    finish = response.finish_reason or ("tool_calls" if response.tool_calls else "stop")
    body: JSON = {
        "id": response_id,
        "object": "chat.completion",
        "created": 0,
        "model": response.model or model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }
    if response.usage is not None:
        usage = response.usage
        body["usage"] = {
            "prompt_tokens": usage.input_tokens,
            "completion_tokens": usage.output_tokens,
            "total_tokens": usage.input_tokens + usage.output_tokens,
            "prompt_tokens_details": {
                "cached_tokens": usage.cached_tokens,
                "cache_write_tokens": usage.cache_write_tokens,
            },
        }
    return body


def error_body(
    message: str, *, code: str | None = None, kind: str = "invalid_request_error"
) -> JSON:
    """An OpenAI-shaped error body (used by the fake server)."""
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}

"""The server side of the OpenAI chat-completions wire, for the fake server: a request body
read back into an `LLMRequest` (`from_request`, the inverse of `openai_wire.to_request`),
and an `LLMResponse` or an error written as OpenAI would (`to_response`, `error_body`).
Pure, like `adapters.llm.openai_wire`.
"""

from __future__ import annotations

from collections.abc import Mapping

from adapters.llm.dialects import gemini_signatures
from adapters.llm.openai_wire import (
    JSON,
    reasoning_from_wire,
    thought_signature,
    tool_call_from_wire,
)
from bot.domain.messages import ChatMessage, ImagePart, Role, ToolCall
from bot.errors import ProviderBadResponse
from bot.ports import LLMRequest, LLMResponse, ToolSpec

_ROLES: frozenset[str] = frozenset({"system", "user", "assistant", "tool"})


def from_request(body: object) -> LLMRequest:
    """The inverse of `to_request`; `ValueError` for a body it cannot map.

    A tool message's `name` is recovered from the assistant call it answers.
    """
    if not isinstance(body, dict):
        raise ValueError("request body is not an object")
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list):
        raise ValueError("messages is not a list")
    names_by_call: dict[str, str] = {}
    messages: list[ChatMessage] = []
    for index, raw in enumerate(raw_messages):
        message = _message_from_wire(raw, index, names_by_call)
        names_by_call.update((call.id, call.name) for call in message.tool_calls)
        messages.append(message)
    raw_tools = body.get("tools") or []
    if not isinstance(raw_tools, list):
        raise ValueError("tools is not a list")
    max_tokens = body.get("max_tokens", body.get("max_completion_tokens"))
    temperature = body.get("temperature")
    model = body.get("model")
    choice = body.get("tool_choice")
    return LLMRequest(
        model=model if isinstance(model, str) else "",
        messages=tuple(messages),
        tools=tuple(_tool_from_wire(raw) for raw in raw_tools),
        max_output_tokens=max_tokens if isinstance(max_tokens, int) else None,
        temperature=float(temperature) if isinstance(temperature, int | float) else None,
        tool_choice=choice if choice in ("auto", "none") else None,
    )


def _message_from_wire(raw: object, index: int, names_by_call: Mapping[str, str]) -> ChatMessage:
    if not isinstance(raw, dict) or raw.get("role") not in _ROLES:
        raise ValueError(f"messages[{index}] has no known role")
    role: Role = raw["role"]
    content = raw.get("content")
    text_parts: list[str] = []
    images: list[ImagePart] = []
    if isinstance(content, str):
        text_parts.append(content)
    elif isinstance(content, list):
        for part in content:
            if not isinstance(part, dict):
                raise ValueError(f"messages[{index}] has a content part that is not an object")
            if part.get("type") == "text":
                text_parts.append(str(part.get("text", "")))
            elif part.get("type") == "image_url" and isinstance(part.get("image_url"), dict):
                images.append(ImagePart(url=str(part["image_url"].get("url", ""))))
    elif content is not None:
        raise ValueError(f"messages[{index}].content is {type(content).__name__}")
    calls: list[ToolCall] = []
    signatures: dict[str, str] = {}
    for call_index, call in enumerate(raw.get("tool_calls") or []):
        try:
            calls.append(tool_call_from_wire(call, call_index))
        except ProviderBadResponse as exc:
            raise ValueError(f"messages[{index}]: {exc}") from exc
        signature = thought_signature(call)
        if signature is not None:
            signatures[calls[-1].id] = signature
    call_id = raw.get("tool_call_id")
    name = raw.get("name")
    if role == "tool" and not isinstance(name, str) and isinstance(call_id, str):
        name = names_by_call.get(call_id)
    return ChatMessage(
        role=role,
        content="\n".join(text_parts),
        tool_calls=tuple(calls),
        tool_call_id=call_id if isinstance(call_id, str) else None,
        name=name if isinstance(name, str) else None,
        images=tuple(images),
        reasoning=reasoning_from_wire(raw, signatures) if role == "assistant" else None,
    )


def _tool_from_wire(raw: object) -> ToolSpec:
    if not isinstance(raw, dict) or not isinstance(raw.get("function"), dict):
        raise ValueError("a tool has no function object")
    function: JSON = raw["function"]
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError("a tool has no name")
    parameters = function.get("parameters")
    description = function.get("description")
    return ToolSpec(
        name=name,
        description=description if isinstance(description, str) else "",
        parameters=parameters if isinstance(parameters, dict) else {},
    )


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

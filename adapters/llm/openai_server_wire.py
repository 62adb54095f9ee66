"""The server side of the OpenAI chat-completions wire: a request body read back into an
`LLMRequest` (`from_request`, the inverse of `openai_wire.to_request`; the dashboard reads
stored bodies with it). Pure, like `adapters.llm.openai_wire`. The tests' fake server writes
its answers with `testkit.openai_answers`.
"""

from __future__ import annotations

from collections.abc import Mapping

from adapters.llm.openai_wire import (
    JSON,
    reasoning_from_wire,
    thought_signature,
    tool_call_from_wire,
)
from bot.domain.messages import ChatMessage, ImagePart, Role, ToolCall
from bot.errors import ProviderBadResponse
from bot.ports import LLMRequest, ToolSpec

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

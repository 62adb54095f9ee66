"""The server side of Anthropic's Messages wire, for the fake server: a request body read
back into an `LLMRequest` (`from_request`, the inverse of `anthropic_wire.to_request`), the
cache markers it carries (`cache_breakpoints`), and an `LLMResponse` or an error written as
Anthropic would (`to_response`, `error_body`). Pure, like `adapters.llm.anthropic_wire`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from adapters.llm.anthropic_thinking import anthropic_blocks, anthropic_reasoning
from adapters.llm.anthropic_wire import (
    JSON,
    THINKING_TYPES,
    tool_call_from_block,
    tool_input,
)
from bot.domain.messages import ChatMessage, ImagePart, ToolCall
from bot.ports import LLMRequest, LLMResponse, ToolSpec, Usage


@dataclass(frozen=True, slots=True)
class Breakpoint:
    """One `cache_control` marker as received: where (`system`, `tools` or the message
    index), the prefix length in blocks up to and including it, and its TTL."""

    where: str
    prefix_blocks: int
    ttl: str


def cache_breakpoints(body: Mapping[str, Any]) -> list[Breakpoint]:
    """Every `cache_control` in the body, in prefix order (tools, system, messages); a
    top-level one (automatic mode) is a breakpoint on the last block."""
    found: list[Breakpoint] = []
    position = 0
    place = "tools"
    for place, blocks in _prefix_blocks(body):
        for block in blocks:
            position += 1
            marker = block.get("cache_control") if isinstance(block, Mapping) else None
            if isinstance(marker, Mapping):
                found.append(Breakpoint(place, position, str(marker.get("ttl", "5m"))))
    automatic = body.get("cache_control")
    if isinstance(automatic, Mapping) and position:
        found.append(Breakpoint(place, position, str(automatic.get("ttl", "5m"))))
    return found


def _prefix_blocks(body: Mapping[str, Any]) -> list[tuple[str, list[Any]]]:
    parts: list[tuple[str, list[Any]]] = [("tools", list(body.get("tools") or []))]
    system = body.get("system")
    if isinstance(system, list):
        parts.append(("system", system))
    elif isinstance(system, str):
        parts.append(("system", [{"type": "text", "text": system}]))
    for index, message in enumerate(body.get("messages") or []):
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        parts.append((f"messages[{index}]", list(content or [])))
    return parts


def from_request(body: object) -> LLMRequest:
    """The inverse of `to_request` (cache markers dropped); `ValueError` when it cannot map."""
    if not isinstance(body, dict):
        raise ValueError("request body is not an object")
    messages: list[ChatMessage] = []
    system = body.get("system")
    if isinstance(system, str):
        messages.append(ChatMessage(role="system", content=system))
    elif isinstance(system, list):
        for block in system:
            if not isinstance(block, dict) or block.get("type") != "text":
                raise ValueError("system blocks must be text blocks")
            messages.append(ChatMessage(role="system", content=str(block.get("text", ""))))
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list) or not raw_messages:
        raise ValueError("messages: at least one message is required")
    names: dict[str, str] = {}
    for index, raw in enumerate(raw_messages):
        messages.extend(_from_wire_message(raw, index, names))
    tools = []
    for raw_tool in body.get("tools") or []:
        if not isinstance(raw_tool, dict) or not isinstance(raw_tool.get("input_schema"), dict):
            raise ValueError("tools: each tool needs an input_schema object")
        tools.append(
            ToolSpec(
                name=str(raw_tool.get("name", "")),
                description=str(raw_tool.get("description", "")),
                parameters=raw_tool["input_schema"],
            )
        )
    choice = body.get("tool_choice")
    choice_type = choice.get("type") if isinstance(choice, dict) else None
    temperature = body.get("temperature")
    return LLMRequest(
        model=str(body.get("model", "")),
        messages=tuple(messages),
        tools=tuple(tools),
        max_output_tokens=body.get("max_tokens")
        if isinstance(body.get("max_tokens"), int)
        else None,
        temperature=float(temperature) if isinstance(temperature, int | float) else None,
        tool_choice=choice_type if choice_type in ("auto", "none") else None,
    )


def _from_wire_message(raw: object, index: int, names: dict[str, str]) -> list[ChatMessage]:
    if not isinstance(raw, dict) or raw.get("role") not in ("user", "assistant"):
        raise ValueError(f"messages.{index}.role: must be user or assistant")
    content = raw.get("content")
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise ValueError(f"messages.{index}.content: must be a string or a list of blocks")
    out: list[ChatMessage] = []
    texts: list[str] = []
    images: list[ImagePart] = []
    calls: list[ToolCall] = []
    thinking: list[JSON] = []
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind in THINKING_TYPES and raw["role"] == "assistant":
            thinking.append(block)
        elif kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "image":
            images.append(_read_image(block))
        elif kind == "tool_use":
            call = tool_call_from_block(block, len(calls))
            names[call.id] = call.name
            calls.append(call)
        elif kind == "tool_result":
            call_id = str(block.get("tool_use_id", ""))
            result = block.get("content", "")
            shown: list[ImagePart] = []
            if isinstance(result, list):
                shown = [_read_image(p) for p in result if p.get("type") == "image"]
                result = "".join(str(part.get("text", "")) for part in result)
            out.append(
                ChatMessage(
                    role="tool",
                    content=str(result),
                    tool_call_id=call_id,
                    name=names.get(call_id),
                    is_error=bool(block.get("is_error")),
                    images=tuple(shown),
                )
            )
        else:
            raise ValueError(f"messages.{index}.content: unknown block type {kind!r}")
    if texts or images or calls:
        out.append(
            ChatMessage(
                role="assistant" if raw["role"] == "assistant" else "user",
                content="\n".join(texts),
                images=tuple(images),
                tool_calls=tuple(calls),
                reasoning=anthropic_reasoning(thinking),
            )
        )
    return out


def _read_image(block: Mapping[str, Any]) -> ImagePart:
    source = block.get("source") or {}
    if source.get("type") == "base64":
        return ImagePart(url=f"data:{source.get('media_type')};base64,{source.get('data')}")
    return ImagePart(url=str(source.get("url", "")))


def to_response(response: LLMResponse, *, model: str, usage: Usage | None = None) -> JSON:
    """A Messages response carrying `response`; `usage` in Anthropic's split (uncached
    `input_tokens` plus the cache reads and writes)."""
    content: list[JSON] = list(anthropic_blocks(response.reasoning))
    if response.text:
        content.append({"type": "text", "text": response.text})
    for call in response.tool_calls:
        content.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": tool_input(call)}
        )
    stop = "tool_use" if response.tool_calls else "end_turn"
    body: JSON = {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": response.model or model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
    }
    billed = usage or response.usage
    if billed is not None:
        body["usage"] = usage_to_wire(billed)
    return body


def usage_to_wire(usage: Usage, *, ttl: str = "5m") -> JSON:
    uncached = max(0, usage.input_tokens - usage.cached_tokens - usage.cache_write_tokens)
    writes = {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0}
    writes[f"ephemeral_{ttl}_input_tokens"] = usage.cache_write_tokens
    return {
        "input_tokens": uncached,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cached_tokens,
        "cache_creation": writes,
        "output_tokens": usage.output_tokens,
    }


def error_body(message: str, *, kind: str = "invalid_request_error") -> JSON:
    """An Anthropic-shaped error body (used by the fake server)."""
    return {"type": "error", "error": {"type": kind, "message": message}}

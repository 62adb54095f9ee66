"""Pure mapping between our LLM vocabulary and OpenAI chat-completions JSON, both directions.

No I/O: the provider does transport and retries, the fake server does HTTP; both call these.
`to_request` / `from_response` are the client side, `from_request` / `to_response` the server
side (used by the fake server), and `classify_error` turns an error response into the
`ProviderError` branch of `bot.errors`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from bot.context.bounded_json import loads_bounded
from bot.domain.messages import ChatMessage, Role, ToolCall
from bot.errors import (
    ContextOverflow,
    ProviderBadResponse,
    ProviderError,
    ProviderRateLimited,
    ProviderUnavailable,
)
from bot.ports import LLMRequest, LLMResponse, ToolSpec, Usage

JSON = dict[str, Any]

_OVERFLOW_CODES = frozenset({"context_length_exceeded"})
_OVERFLOW_PHRASES = re.compile(
    r"maximum context length|prompt is too long|context window|too many tokens"
    r"|context_length_exceeded",
    re.IGNORECASE,
)
_MAX_ERROR_TEXT = 300
_ROLES: frozenset[str] = frozenset({"system", "user", "assistant", "tool"})

# ---------------------------------------------------------------- client side: request


def to_request(request: LLMRequest) -> JSON:
    """The chat-completions body for `request`; our private message fields stay behind."""
    body: JSON = {
        "model": request.model,
        "messages": [_message_to_wire(m) for m in request.messages],
    }
    if request.tools:
        body["tools"] = [_tool_to_wire(t) for t in request.tools]
        if request.tool_choice is not None:
            body["tool_choice"] = request.tool_choice
    if request.max_output_tokens is not None:
        body["max_tokens"] = request.max_output_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    return body


def _message_to_wire(message: ChatMessage) -> JSON:
    wire: JSON = {"role": message.role}
    if message.role == "tool":
        wire["tool_call_id"] = message.tool_call_id or ""
        wire["content"] = message.content
        return wire
    if message.images:
        parts: list[JSON] = []
        if message.content:
            parts.append({"type": "text", "text": message.content})
        parts.extend({"type": "image_url", "image_url": {"url": url}} for url in message.images)
        wire["content"] = parts
    elif message.role == "assistant" and message.tool_calls and not message.content:
        # the spec's form for "only tool calls"; some servers reject an empty string here
        wire["content"] = None
    else:
        wire["content"] = message.content
    if message.tool_calls:
        wire["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in message.tool_calls
        ]
    return wire


def _tool_to_wire(tool: ToolSpec) -> JSON:
    parameters = tool.parameters or {"type": "object", "properties": {}}
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": parameters,
        },
    }


# ---------------------------------------------------------------- client side: response


def from_response(body: object) -> LLMResponse:
    """The first choice of a chat-completions body; `ProviderBadResponse` when it cannot map."""
    if not isinstance(body, dict):
        raise ProviderBadResponse(f"response body is {type(body).__name__}, not an object")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        raise ProviderBadResponse("response has no choices")
    choice = choices[0]
    if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
        raise ProviderBadResponse("choices[0] has no message object")
    message: JSON = choice["message"]
    text = _content_text(message.get("content"))
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise ProviderBadResponse("message.tool_calls is not a list")
    calls = tuple(_tool_call_from_wire(raw, index) for index, raw in enumerate(raw_calls))
    if not text and not calls:
        raise ProviderBadResponse("empty reply")
    finish_reason = choice.get("finish_reason")
    model = body.get("model")
    return LLMResponse(
        text=text,
        tool_calls=calls,
        usage=_usage_from_wire(body.get("usage")),
        finish_reason=finish_reason if isinstance(finish_reason, str) else None,
        model=model if isinstance(model, str) else None,
    )


def _content_text(content: object) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        # a few compatible servers answer with content parts; keep the text ones
        texts = [
            part["text"]
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        ]
        return "".join(texts)
    raise ProviderBadResponse(f"message.content is {type(content).__name__}")


def _tool_call_from_wire(raw: object, index: int) -> ToolCall:
    if not isinstance(raw, dict) or not isinstance(raw.get("function"), dict):
        raise ProviderBadResponse(f"tool call {index} has no function object")
    function: JSON = raw["function"]
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise ProviderBadResponse(f"tool call {index} has no name")
    arguments = function.get("arguments")
    if arguments is None:
        arguments = "{}"
    elif isinstance(arguments, dict):
        # Ollama and some proxies send the object instead of its JSON text
        arguments = json.dumps(arguments, ensure_ascii=False)
    elif not isinstance(arguments, str):
        raise ProviderBadResponse(f"tool call {index} arguments are not text")
    call_id = raw.get("id")
    if not isinstance(call_id, str) or not call_id:
        call_id = f"call_{index}"  # some local servers omit ids; results still need one
    return ToolCall(id=call_id, name=name, arguments=arguments)


def _usage_from_wire(raw: object) -> Usage | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ProviderBadResponse("usage is not an object")
    prompt = _int_field(raw, "prompt_tokens")
    completion = _int_field(raw, "completion_tokens")
    cached = 0
    details = raw.get("prompt_tokens_details")
    if isinstance(details, dict) and details.get("cached_tokens") is not None:
        cached = _int_field(details, "cached_tokens")
    elif raw.get("prompt_cache_hit_tokens") is not None:  # DeepSeek
        cached = _int_field(raw, "prompt_cache_hit_tokens")
    return Usage(input_tokens=prompt, output_tokens=completion, cached_tokens=min(cached, prompt))


def _int_field(raw: Mapping[str, Any], key: str) -> int:
    value = raw.get(key, 0)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ProviderBadResponse(f"usage.{key} is not a count")
    return value


# ---------------------------------------------------------------- client side: errors


def classify_error(
    status: int,
    body: Mapping[str, Any] | str,
    headers: Mapping[str, str] | None = None,
    *,
    now: datetime | None = None,
) -> ProviderError:
    """The `ProviderError` an error response means; the provider's own message is kept."""
    message, code = _error_message_and_code(body)
    described = f"HTTP {status}: {message}" if message else f"HTTP {status}"
    if status == 429:
        return ProviderRateLimited(described, retry_after=retry_after_seconds(headers, now=now))
    if 400 <= status < 500 and (code in _OVERFLOW_CODES or _OVERFLOW_PHRASES.search(message)):
        return ContextOverflow(described)
    if status >= 500:
        return ProviderUnavailable(described)
    return ProviderBadResponse(described)


def _error_message_and_code(body: Mapping[str, Any] | str) -> tuple[str, str | None]:
    if isinstance(body, str):
        try:
            parsed = loads_bounded(body)  # a hostile body nests 100,000 deep
        except ValueError:
            return _clip(body), None
        if not isinstance(parsed, dict):
            return _clip(body), None
        body = parsed
    error = body.get("error", body)
    if isinstance(error, str):
        return _clip(error), None
    if not isinstance(error, Mapping):
        return _clip(json.dumps(body, ensure_ascii=False, default=str)), None
    message = error.get("message") or error.get("detail") or body.get("detail") or ""
    if not isinstance(message, str):
        message = json.dumps(message, ensure_ascii=False, default=str)
    code = error.get("code") or error.get("type")
    return _clip(message), code if isinstance(code, str) else None


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_ERROR_TEXT else text[: _MAX_ERROR_TEXT - 1] + "…"


def retry_after_seconds(
    headers: Mapping[str, str] | None, *, now: datetime | None = None
) -> float | None:
    """`retry-after-ms`, else `Retry-After` (seconds or an HTTP date); `None` when absent."""
    if not headers:
        return None
    lowered = {key.lower(): value for key, value in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


# ---------------------------------------------------------------- server side (fake server)


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
    images: list[str] = []
    if isinstance(content, str):
        text_parts.append(content)
    elif isinstance(content, list):
        for part in content:
            if not isinstance(part, dict):
                raise ValueError(f"messages[{index}] has a content part that is not an object")
            if part.get("type") == "text":
                text_parts.append(str(part.get("text", "")))
            elif part.get("type") == "image_url" and isinstance(part.get("image_url"), dict):
                images.append(str(part["image_url"].get("url", "")))
    elif content is not None:
        raise ValueError(f"messages[{index}].content is {type(content).__name__}")
    calls: list[ToolCall] = []
    for call_index, call in enumerate(raw.get("tool_calls") or []):
        try:
            calls.append(_tool_call_from_wire(call, call_index))
        except ProviderBadResponse as exc:
            raise ValueError(f"messages[{index}]: {exc}") from exc
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
    if response.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in response.tool_calls
        ]
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
            "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
        }
    return body


def error_body(
    message: str, *, code: str | None = None, kind: str = "invalid_request_error"
) -> JSON:
    """An OpenAI-shaped error body (used by the fake server)."""
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


__all__ = (
    "classify_error",
    "error_body",
    "from_request",
    "from_response",
    "retry_after_seconds",
    "to_request",
    "to_response",
)

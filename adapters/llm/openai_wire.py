"""Pure mapping between our LLM vocabulary and OpenAI chat-completions JSON, both directions.

No I/O: the provider does transport and retries. `to_request` / `from_response` are the
client side; the streaming `StreamState` is `adapters.llm.openai_stream`, an error response
read as the `ProviderError` branch of `bot.errors` is `adapters.llm.provider_errors`, and the
server side (reading a request back) is `adapters.llm.openai_server_wire`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from adapters.llm.cache_breakpoints import mark_breakpoints
from adapters.llm.dialects import (
    WireOptions,
    gemini_reasoning,
    gemini_signatures,
    max_tokens_key,
    merge_extra_body,
    reasoning_fields,
    tool_turn_messages,
)
from adapters.llm.openai_images import image_part, with_tool_images
from adapters.llm.provider_errors import error_in_body
from bot.domain.messages import ChatMessage, Reasoning, ToolCall
from bot.errors import (
    ProviderBadResponse,
)
from bot.ports import LLMRequest, LLMResponse, StopReason, ToolSpec, Usage

JSON = dict[str, Any]

_STOPS: dict[str, StopReason] = {
    "stop": "end",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "refusal",
}
"""`finish_reason` as the runtime reads it (platform.openai.com/docs/api-reference/chat/object:
stop, length, tool_calls, content_filter, function_call; DeepSeek adds
insufficient_system_resource, which stays unmapped)."""

# ---------------------------------------------------------------- client side: request


_DEFAULT_OPTIONS = WireOptions()


def to_request(
    request: LLMRequest, options: WireOptions = _DEFAULT_OPTIONS, *, stream: bool = False
) -> JSON:
    """The chat-completions body for `request` in the dialect `options` describe; our private
    message fields stay behind."""
    messages = [_message_to_wire(m) for m in request.messages]
    _replay_reasoning(messages, request.messages, options, request.model)
    if options.marks_breakpoints:
        mark_breakpoints(messages, request, options)
    if any(m.role == "tool" and m.images for m in request.messages):
        messages = with_tool_images(messages, request.messages)
    body: JSON = {"model": request.model, "messages": messages}
    if request.tools:
        body["tools"] = [_tool_to_wire(t) for t in request.tools]
        if request.tool_choice is not None:
            body["tool_choice"] = request.tool_choice
    if request.max_output_tokens is not None:
        body[max_tokens_key(options, request.model)] = request.max_output_tokens
    thinking = reasoning_fields(options, request.model)
    body.update(thinking.fields)
    if request.temperature is not None:
        body["temperature"] = request.temperature
    merge_extra_body(body, options.extra_body)
    if thinking.thinking:
        body.pop("temperature", None)  # refused (or ignored) while the model thinks
    plan = request.cache_plan
    if options.prompt_cache_key and options.cache != "off" and plan and plan.session_key:
        body["prompt_cache_key"] = plan.session_key
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def _replay_reasoning(
    wire: list[JSON], messages: tuple[ChatMessage, ...], options: WireOptions, model: str
) -> None:
    """Put each kept reasoning back where its provider wants it (`adapters.llm.dialects`):
    text reasoning on the assistant messages of tool turns, Gemini signatures on their
    tool calls always, DeepSeek's empty field where a tool turn has none."""
    tool_turns = tool_turn_messages(messages)
    for index, message in enumerate(messages):
        if message.role != "assistant":
            continue
        reasoning = message.reasoning
        if reasoning is not None and not reasoning.signed_for(model):
            reasoning = None  # another model's signature: refused if sent (a /model switch)
        if reasoning is not None and reasoning.format == "openrouter":
            # OpenRouter: its `reasoning_details` go back as they came, on every message
            # that had them (Gemini's signatures and Claude's ride inside)
            wire[index]["reasoning_details"] = json.loads(reasoning.payload)
            continue
        if reasoning is not None and reasoning.format == "gemini":
            signatures = gemini_signatures(reasoning)
            if (own := signatures.get(MESSAGE_SIGNATURE)) is not None:  # a text-only reply's
                wire[index]["extra_content"] = {"google": {"thought_signature": own}}
            for call in wire[index].get("tool_calls") or []:
                signature = signatures.get(call["id"])
                if signature is not None:
                    call["extra_content"] = {"google": {"thought_signature": signature}}
            continue
        if index not in tool_turns:
            continue
        if reasoning is not None and reasoning.format in ("reasoning_content", "reasoning"):
            wire[index][reasoning.format] = reasoning.text
        elif options.reasoning_dialect == "deepseek" and options.reasoning != "off":
            wire[index]["reasoning_content"] = ""


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
        parts.extend(image_part(image) for image in message.images)
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
    """The first choice of a chat-completions body; `ProviderBadResponse` when it cannot map,
    the error's own branch when a 200 body carries an error (OpenRouter does)."""
    if not isinstance(body, dict):
        raise ProviderBadResponse(f"response body is {type(body).__name__}, not an object")
    if body.get("error") and not body.get("choices"):
        raise error_in_body(body)
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        raise ProviderBadResponse("response has no choices")
    choice = choices[0]
    if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
        raise ProviderBadResponse("choices[0] has no message object")
    message: JSON = choice["message"]
    text = content_text(message.get("content"))
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise ProviderBadResponse("message.tool_calls is not a list")
    calls = tuple(tool_call_from_wire(raw, index) for index, raw in enumerate(raw_calls))
    refusal = message.get("refusal")
    refusal = refusal if isinstance(refusal, str) else ""
    finish_reason = choice.get("finish_reason")
    finish_reason = finish_reason if isinstance(finish_reason, str) else None
    stop = stop_of(finish_reason, refusal=refusal, calls=bool(calls))
    if not text and not calls and stop not in SAYS_WHY_EMPTY:
        raise ProviderBadResponse("empty reply")
    model = body.get("model")
    signatures = {
        call.id: signature
        for call, raw in zip(calls, raw_calls, strict=True)
        if (signature := thought_signature(raw)) is not None
    }
    if (own := thought_signature(message)) is not None:  # on the message itself
        signatures[MESSAGE_SIGNATURE] = own
    return LLMResponse(
        text=text,
        tool_calls=calls,
        usage=usage_from_wire(body.get("usage")),
        finish_reason=finish_reason,
        model=model if isinstance(model, str) else None,
        reasoning=reasoning_from_wire(message, signatures),
        stop=stop,
        refusal=refusal,
    )


REASONING_FIELDS = ("reasoning_content", "reasoning")
"""DeepSeek, vLLM and llama.cpp write `reasoning_content`; Ollama and OpenRouter `reasoning`."""


def reasoning_from_wire(
    message: Mapping[str, Any], signatures: Mapping[str, str]
) -> Reasoning | None:
    """The reasoning an assistant message (or the folded deltas of one) carried: OpenRouter's
    `reasoning_details` (kept whole, to go back unmodified), else Gemini's thought signatures
    on its tool calls, else its text reasoning field, kept as written."""
    details = message.get("reasoning_details")
    if isinstance(details, list) and details:
        text = message.get("reasoning")
        return Reasoning(
            format="openrouter",
            text=text if isinstance(text, str) else "",
            payload=json.dumps(details, ensure_ascii=False),
        )
    for key in REASONING_FIELDS:
        text = message.get(key)
        if isinstance(text, str) and text:
            if signatures:
                return gemini_reasoning(signatures, text)
            return Reasoning(format=key, text=text)  # type: ignore[arg-type]
    return gemini_reasoning(signatures)


MESSAGE_SIGNATURE = "_message"
"""Where a Gemini payload keeps the signature of the message itself (a text-only reply
carries one there rather than on a tool call), beside those by tool call id."""


def thought_signature(raw: object) -> str | None:
    """Gemini's `extra_content.google.thought_signature` on a tool call (or on a message,
    or a stream's delta), if any."""
    if not isinstance(raw, Mapping):
        return None
    extra = raw.get("extra_content")
    google = extra.get("google") if isinstance(extra, Mapping) else None
    signature = google.get("thought_signature") if isinstance(google, Mapping) else None
    return signature if isinstance(signature, str) and signature else None


SAYS_WHY_EMPTY: frozenset[StopReason | None] = frozenset({"refusal", "length", "context"})
"""Stops that explain an empty reply (a refusal; a limit reached while thinking): the
runtime handles them, a retry of the same request would not help."""


def stop_of(finish_reason: str | None, *, refusal: str, calls: bool) -> StopReason | None:
    """What `finish_reason` means here: a refusal text wins over `stop` and `length`, and
    tool calls finished with `stop` (Ollama and some local servers say so) are `tool_calls`."""
    stop = _STOPS.get(finish_reason) if finish_reason is not None else None
    if refusal and stop in (None, "end", "length"):
        return "refusal"
    if calls and stop in (None, "end"):
        return "tool_calls"
    return stop


def content_text(content: object) -> str:
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


def tool_call_from_wire(raw: object, index: int) -> ToolCall:
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


def usage_from_wire(raw: object) -> Usage | None:
    """Usage as billed from any OpenAI-wire provider (see `Usage`).

    - `prompt_tokens` is the whole input; reads are `prompt_tokens_details.cached_tokens`
      (OpenAI, OpenRouter, Qwen, xAI, Gemini), DeepSeek's `prompt_cache_hit_tokens` (which
      wins over a nested zero), or Moonshot's top-level `cached_tokens`.
    - writes are `prompt_tokens_details.cache_write_tokens` (OpenAI GPT-5.6, OpenRouter) or
      `cache_creation_input_tokens` (Qwen's explicit cache, nested; gateways relaying
      Anthropic usage, top level).
    - an Anthropic-shaped body (`input_tokens`, no `prompt_tokens`) is summed as Anthropic
      bills it: input + cache reads + cache writes.
    """
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ProviderBadResponse("usage is not an object")
    if raw.get("prompt_tokens") is None and raw.get("input_tokens") is not None:
        return anthropic_usage(raw)
    prompt = _int_field(raw, "prompt_tokens")
    completion = _int_field(raw, "completion_tokens")
    details = raw.get("prompt_tokens_details")
    details = details if isinstance(details, dict) else {}
    if raw.get("prompt_cache_hit_tokens") is not None:  # DeepSeek
        cached = _int_field(raw, "prompt_cache_hit_tokens")
    elif details.get("cached_tokens") is not None:
        cached = _int_field(details, "cached_tokens")
    elif raw.get("cached_tokens") is not None:  # Moonshot
        cached = _int_field(raw, "cached_tokens")
    else:
        cached = _int_field(raw, "cache_read_input_tokens")
    written = 0
    for source, key in (
        (details, "cache_write_tokens"),
        (details, "cache_creation_input_tokens"),
        (raw, "cache_creation_input_tokens"),
    ):
        if source.get(key) is not None:
            written = _int_field(source, key)
            break
    cached = min(cached, prompt)
    return Usage(
        input_tokens=prompt,
        output_tokens=completion,
        cached_tokens=cached,
        cache_write_tokens=min(written, prompt - cached),
        reasoning_tokens=min(_reasoning_tokens(raw), completion),
    )


def _reasoning_tokens(raw: Mapping[str, Any]) -> int:
    """`completion_tokens_details.reasoning_tokens` (OpenAI, DeepSeek, OpenRouter, xAI…);
    0 when absent."""
    details = raw.get("completion_tokens_details")
    if not isinstance(details, dict):
        return 0
    return _int_field(details, "reasoning_tokens")


def anthropic_usage(raw: Mapping[str, Any]) -> Usage:
    """Anthropic's usage: `input_tokens` counts only what follows the last breakpoint, so the
    billed input adds the cache reads and writes (`cache_creation` splits writes by TTL; its
    sum is used when the total is missing; its `ephemeral_1h_input_tokens` are the 1-hour
    writes, billed at 2× input where a 5-minute write is 1.25×). Thinking tokens are
    `output_tokens_details.thinking_tokens` (part of `output_tokens`)."""
    uncached = _int_field(raw, "input_tokens")
    read = _int_field(raw, "cache_read_input_tokens")
    creation = raw.get("cache_creation")
    creation = creation if isinstance(creation, dict) else {}
    hour = _int_field(creation, "ephemeral_1h_input_tokens")
    if raw.get("cache_creation_input_tokens") is not None:
        written = _int_field(raw, "cache_creation_input_tokens")
    else:
        written = _int_field(creation, "ephemeral_5m_input_tokens") + hour
    output = _int_field(raw, "output_tokens")
    if raw.get("output_tokens") is None:
        output = _int_field(raw, "completion_tokens")
    details = raw.get("output_tokens_details")
    thinking = _int_field(details, "thinking_tokens") if isinstance(details, dict) else 0
    return Usage(
        input_tokens=uncached + read + written,
        output_tokens=output,
        cached_tokens=read,
        cache_write_tokens=written,
        cache_write_1h_tokens=min(hour, written),
        reasoning_tokens=min(thinking, output),
    )


def _int_field(raw: Mapping[str, Any], key: str) -> int:
    value = raw.get(key, 0)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ProviderBadResponse(f"usage.{key} is not a count")
    return value


__all__ = (
    "anthropic_usage",
    "from_response",
    "reasoning_from_wire",
    "stop_of",
    "thought_signature",
    "to_request",
    "tool_call_from_wire",
    "usage_from_wire",
)

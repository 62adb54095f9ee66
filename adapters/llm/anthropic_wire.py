"""Pure mapping between our LLM vocabulary and Anthropic's Messages API JSON (the client side).

No I/O, like `openai_wire`. Client side: `to_request` (system blocks, `tool_use` /
`tool_result` blocks, images, tools with `input_schema`, the cache plan as `cache_control`),
`from_response`, `StreamState` (the Messages event stream); the server side, for the
tests' fake, is `testkit.anthropic_server_wire`. Errors use `provider_errors.classify_error`,
which reads Anthropic's `{"type": "error", "error": {"type", "message"}}` as well.

Reference: docs.anthropic.com/en/api/messages, /en/docs/build-with-claude/prompt-caching,
/en/api/messages-streaming.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from adapters.llm.anthropic_thinking import (
    TEXT_MARK,
    TOOL_USE_MARK,
    anthropic_blocks,
    anthropic_layout,
    anthropic_reasoning,
)
from adapters.llm.cache_breakpoints import breakpoint_indexes
from adapters.llm.dialects import (
    ReasoningFields,
    WireOptions,
    merge_extra_body,
    reasoning_fields,
    tool_turn_messages,
)
from adapters.llm.openai_wire import anthropic_usage
from adapters.llm.provider_errors import classify_error
from bot.domain.messages import ChatMessage, ToolCall
from bot.errors import ProviderBadResponse, ProviderError
from bot.ports import LLMRequest, LLMResponse, StopReason, ToolSpec

JSON = dict[str, Any]

API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
"""`max_tokens` is required by the Messages API; used when the request sets none."""
MAX_BREAKPOINTS = 4
_ANTHROPIC_OPTIONS = WireOptions(kind="anthropic", cache="breakpoints")
_ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}
"""The HTTP status each documented error type comes with (for errors inside a stream)."""
_STOPS: dict[str, StopReason] = {
    "end_turn": "end",
    "stop_sequence": "end",
    "pause_turn": "end",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "refusal",
    "model_context_window_exceeded": "context",
}
"""`stop_reason` as the runtime reads it (docs.anthropic.com/en/api/messages, "stop_reason";
the SDK's `StopReason`). `pause_turn` comes only with server tools, which the bot does not
offer; read as an end.
"""
_SAYS_WHY_EMPTY: frozenset[StopReason | None] = frozenset({"refusal", "length", "context"})

# ---------------------------------------------------------------- client side: request


def to_request(
    request: LLMRequest, options: WireOptions = _ANTHROPIC_OPTIONS, *, stream: bool = False
) -> JSON:
    """The Messages body for `request`; breakpoints from its cache plan when `options` say."""
    system, messages, last_block = _wire_messages(request, options)
    marker: JSON = {"type": "ephemeral"}
    if options.cache_ttl == "1h":
        marker["ttl"] = "1h"
    if options.marks_breakpoints:
        for index, ttl in marked_points(request, options):
            target = last_block.get(index)
            if target is not None:
                hour: JSON = {"type": "ephemeral", "ttl": "1h"}
                target["cache_control"] = hour if ttl else dict(marker)
    thinking_fields = reasoning_fields(options, request.model)
    if thinking_fields.thinking and _loop_without_thinking(request, options):
        # a tool loop another model began (a fallback took over mid-turn): its last step
        # has no thinking signed for this model, and the API refuses thinking then ("To
        # avoid this requirement, disable `thinking`"); this one request goes without
        thinking_fields = ReasoningFields({}, thinking=False)
    body: JSON = {
        "model": request.model,
        "max_tokens": (request.max_output_tokens or DEFAULT_MAX_TOKENS)
        + thinking_fields.extra_output_tokens,
        "messages": messages,
    }
    if options.cache == "auto":
        # Anthropic's automatic mode: one breakpoint on the last cacheable block (the newest
        # message, whose per-turn blocks the next request drops, so its write is never read)
        body["cache_control"] = marker
    if system:
        body["system"] = system
    if request.tools:
        body["tools"] = [_tool_to_wire(tool) for tool in request.tools]
        if request.tool_choice is not None:
            body["tool_choice"] = {"type": request.tool_choice}
    body.update(thinking_fields.fields)
    if request.temperature is not None:
        body["temperature"] = request.temperature
    merge_extra_body(body, options.extra_body)
    if thinking_fields.thinking:
        body.pop("temperature", None)  # "not compatible with temperature" modifications
    if stream:
        body["stream"] = True
    return body


def _wire_messages(
    request: LLMRequest, options: WireOptions
) -> tuple[list[JSON], list[JSON], dict[int, JSON]]:
    """The system blocks, the messages, and the wire block each source message ended in
    (where its breakpoint goes)."""
    system: list[JSON] = []
    messages: list[JSON] = []
    last_block: dict[int, JSON] = {}
    leading = True
    # thinking goes back on the assistant messages of tool turns (adapters.llm.dialects)
    tool_turns = tool_turn_messages(request.messages, boundaries=("user", "system"))
    empty_thinking = options.reasoning_dialect == "deepseek" and options.reasoning != "off"
    for index, message in enumerate(request.messages):
        if message.role == "system" and leading:
            if not message.content:
                continue  # the API refuses empty text blocks
            block: JSON = {"type": "text", "text": message.content}
            system.append(block)
            last_block[index] = block
            continue
        leading = False
        blocks = _blocks(message)
        if not blocks:
            continue
        if index in tool_turns:
            layout = _signed_layout(message, request.model)
            if layout is not None:  # interleaved: each thinking block back in its place
                blocks = _interleaved(layout, blocks)
            else:
                blocks = [*_thinking_blocks(message, request.model, empty_thinking), *blocks]
        role = "assistant" if message.role == "assistant" else "user"
        if message.role == "tool" and messages and _all_tool_results(messages[-1]):
            messages[-1]["content"].extend(blocks)  # results of one step share a user turn
        else:
            messages.append({"role": role, "content": blocks})
        last_block[index] = blocks[-1]
    return system, messages, last_block


def _loop_without_thinking(request: LLMRequest, options: WireOptions) -> bool:
    """Whether the request continues a tool loop whose last assistant step carries no
    thinking this model signed (DeepSeek's endpoint takes its empty block instead)."""
    messages = request.messages
    if options.reasoning_dialect == "deepseek" or not messages or messages[-1].role != "tool":
        return False
    last = next((m for m in reversed(messages) if m.role == "assistant"), None)
    if last is None or not last.tool_calls:
        return False
    kept = last.reasoning
    return kept is None or not kept.signed_for(request.model) or not anthropic_blocks(kept)


def _signed_layout(message: ChatMessage, model: str) -> list[JSON] | None:
    kept = message.reasoning
    return anthropic_layout(kept) if kept is not None and kept.signed_for(model) else None


def _interleaved(layout: list[JSON], blocks: list[JSON]) -> list[JSON]:
    """`blocks` with the kept thinking blocks where they came (`layout`): the text where
    the first text was, each tool_use where it was; anything else after."""
    placed: list[JSON] = []
    rest = list(blocks)
    for item in layout:
        kind = item.get("type")
        if kind == TEXT_MARK:
            found = [b for b in rest if b.get("type") == "text"]
        elif kind == TOOL_USE_MARK:
            found = [b for b in rest if b.get("type") == "tool_use" and b["id"] == item.get("id")]
        else:
            placed.append(item)
            continue
        placed.extend(found)
        rest = [b for b in rest if not any(b is f for f in found)]
    return placed + rest


def _thinking_blocks(message: ChatMessage, model: str, empty_thinking: bool) -> list[JSON]:
    """The thinking that opens a tool turn's assistant message: its kept reasoning when
    signed for `model`, else DeepSeek's empty block when the dialect needs one."""
    kept = message.reasoning
    signed = kept is not None and kept.signed_for(model)
    thinking = anthropic_blocks(kept) if signed else []
    if not thinking and empty_thinking:
        thinking = [{"type": "thinking", "thinking": "", "signature": ""}]
    return thinking


def marked_points(request: LLMRequest, options: WireOptions) -> list[tuple[int, bool]]:
    """The plan's breakpoints as this wire marks them, each with whether it is written for
    1 h (instead of the marker's TTL).

    The system prompt (with the tools before it) is the same for the chat's whole life: it
    is written for 1 h even when the profile says 5m, so a lull of more than 5 minutes
    costs the conversation's entries, not the prompt's (1h entries come first, as the API
    requires). The cache keys message blocks by `tool_choice` (a change "only affect[s]
    message blocks"): a `tool_choice: none` request (a summary, the answer at the iteration
    cap) marks only the system prompt, the one entry it shares with the turn's requests."""
    plan = request.cache_plan
    system_end = plan.system_end if plan is not None else None
    points = breakpoint_indexes(request, MAX_BREAKPOINTS)
    if request.tool_choice == "none" and request.tools:
        points = tuple(i for i in points if system_end is not None and i <= system_end)
    return [(i, i == system_end and options.cache_ttl != "1h") for i in points]


def _all_tool_results(message: JSON) -> bool:
    content = message.get("content")
    return (
        message.get("role") == "user"
        and isinstance(content, list)
        and bool(content)
        and all(block.get("type") == "tool_result" for block in content)
    )


def _blocks(message: ChatMessage) -> list[JSON]:
    if message.role == "tool":
        result: JSON = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id or "",
            "content": message.content,
        }
        if message.images:  # a viewed image goes back inside its tool result
            parts: list[JSON] = [{"type": "text", "text": message.content}]
            parts.extend(_image_block(image.url) for image in message.images)
            result["content"] = parts
        if message.is_error:
            result["is_error"] = True
        return [result]
    blocks: list[JSON] = []
    if message.content:
        text = message.content
        if message.role == "system":  # a system note inside the conversation
            text = f"[system]\n{text}"
        blocks.append({"type": "text", "text": text})
    blocks.extend(_image_block(image.url) for image in message.images)
    for call in message.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": tool_input(call)}
        )
    return blocks


def tool_input(call: ToolCall) -> JSON:
    try:
        parsed = json.loads(call.arguments or "{}")
    except ValueError:
        return {}  # the runner already answered the bad call; the API wants an object here
    return parsed if isinstance(parsed, dict) else {}


def _image_block(url: str) -> JSON:
    if url.startswith("data:") and ";base64," in url:
        media_type, _, data = url.removeprefix("data:").partition(";base64,")
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }
    return {"type": "image", "source": {"type": "url", "url": url}}


def _tool_to_wire(tool: ToolSpec) -> JSON:
    return {
        "name": tool.name,
        "description": tool.description,
        "input_schema": tool.parameters or {"type": "object", "properties": {}},
    }


# ---------------------------------------------------------------- client side: response


def from_response(body: object) -> LLMResponse:
    """A Messages response; `ProviderBadResponse` when it cannot map."""
    if not isinstance(body, dict):
        raise ProviderBadResponse(f"response body is {type(body).__name__}, not an object")
    if body.get("type") == "error":
        raise stream_error(body)
    content = body.get("content")
    if not isinstance(content, list):
        raise ProviderBadResponse("response has no content list")
    texts: list[str] = []
    calls: list[ToolCall] = []
    for index, block in enumerate(content):
        if not isinstance(block, dict):
            raise ProviderBadResponse(f"content[{index}] is not an object")
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif block.get("type") == "tool_use":
            calls.append(tool_call_from_block(block, index))
    # thinking blocks kept whole (their signatures come back unchanged), in their places
    text = "".join(texts)
    reason = body.get("stop_reason")
    reason = reason if isinstance(reason, str) else None
    stop = _STOPS.get(reason) if reason is not None else None
    if not text and not calls and stop not in _SAYS_WHY_EMPTY:
        raise ProviderBadResponse("empty reply")
    usage = body.get("usage")
    if usage is not None and not isinstance(usage, dict):
        raise ProviderBadResponse("usage is not an object")
    model = body.get("model")
    return LLMResponse(
        text=text,
        tool_calls=tuple(calls),
        usage=anthropic_usage(usage) if usage is not None else None,
        finish_reason=reason,
        model=model if isinstance(model, str) else None,
        reasoning=anthropic_reasoning(content),
        stop=stop,
        refusal=_refusal_text(body) if stop == "refusal" else "",
    )


THINKING_TYPES = ("thinking", "redacted_thinking")


def _refusal_text(body: Mapping[str, Any]) -> str:
    """The `stop_details.explanation` a refusal may carry (for the operator), else ""."""
    details = body.get("stop_details")
    explanation = details.get("explanation") if isinstance(details, Mapping) else None
    return explanation if isinstance(explanation, str) else ""


def tool_call_from_block(block: Mapping[str, Any], index: int) -> ToolCall:
    name = block.get("name")
    if not isinstance(name, str) or not name:
        raise ProviderBadResponse(f"tool_use {index} has no name")
    raw = block.get("input")
    arguments = raw if isinstance(raw, str) else json.dumps(raw or {}, ensure_ascii=False)
    call_id = block.get("id")
    return ToolCall(
        id=call_id if isinstance(call_id, str) and call_id else f"toolu_{index}",
        name=name,
        arguments=arguments,
    )


def stream_error(body: Mapping[str, Any]) -> ProviderError:
    """The `ProviderError` of an `error` event (or a 200 body of type error)."""
    error = body.get("error")
    kind = error.get("type") if isinstance(error, Mapping) else None
    status = _ERROR_STATUS.get(kind, 500) if isinstance(kind, str) else 500
    return classify_error(status, dict(body))


@dataclass(slots=True)
class StreamState:
    """Folds the Messages event stream into the response `from_response` would give."""

    text: str = ""
    usage: JSON = field(default_factory=dict)
    stop_reason: str | None = None
    stop_details: JSON = field(default_factory=dict)
    model: str | None = None
    _blocks: dict[int, JSON] = field(default_factory=dict)
    _done: bool = False

    def feed(self, event: str, data: Mapping[str, Any]) -> bool:
        """Take one event; True when the text grew. An `error` event raises its error."""
        kind = data.get("type", event)
        if kind == "error":
            raise stream_error(data)
        if kind == "message_start":
            message = data.get("message")
            if isinstance(message, Mapping):
                if isinstance(message.get("usage"), Mapping):
                    self.usage.update(message["usage"])
                if isinstance(message.get("model"), str):
                    self.model = message["model"]
        elif kind == "content_block_start":
            block = data.get("content_block")
            if isinstance(block, Mapping):
                self._blocks[_index(data)] = {**block, "partial": ""}
        elif kind == "content_block_delta":
            return self._delta(data)
        elif kind == "message_delta":
            self._message_delta(data)
        elif kind == "message_stop":
            self._done = True
        return False

    def _delta(self, data: Mapping[str, Any]) -> bool:
        """A `content_block_delta`: text (True when it grew), tool input, thinking or its
        signature, each onto its block."""
        delta = data.get("delta")
        block = self._blocks.setdefault(_index(data), {"type": "text", "partial": ""})
        if not isinstance(delta, Mapping):
            return False
        kind = delta.get("type")
        if kind == "text_delta" and isinstance(delta.get("text"), str):
            self.text += delta["text"]
            return bool(delta["text"])
        if kind == "input_json_delta":
            block["partial"] += str(delta.get("partial_json", ""))
        elif kind == "thinking_delta":
            block["thinking"] = str(block.get("thinking", "")) + str(delta.get("thinking", ""))
        elif kind == "signature_delta":
            block["signature"] = str(block.get("signature", "")) + str(delta.get("signature", ""))
        return False

    def _message_delta(self, data: Mapping[str, Any]) -> None:
        delta = data.get("delta")
        if isinstance(delta, Mapping) and isinstance(delta.get("stop_reason"), str):
            self.stop_reason = delta["stop_reason"]
            if isinstance(delta.get("stop_details"), Mapping):
                self.stop_details = dict(delta["stop_details"])
        if isinstance(data.get("usage"), Mapping):
            self.usage.update(data["usage"])  # cumulative counts

    def result(self) -> LLMResponse:
        if not self._done and self.stop_reason is None:
            raise ProviderBadResponse("the event stream ended before message_stop")
        stop = _STOPS.get(self.stop_reason) if self.stop_reason is not None else None
        calls: list[ToolCall] = []
        content: list[JSON] = []  # in order: thinking whole, the others for their places
        for index in sorted(self._blocks):
            block = self._blocks[index]
            content.append({k: v for k, v in block.items() if k != "partial"})
            if block.get("type") in THINKING_TYPES:
                continue
            if block.get("type") != "tool_use":
                continue
            partial = block.get("partial") or ""
            try:
                arguments = json.loads(partial) if partial else block.get("input") or {}
            except ValueError as exc:
                if stop != "length":
                    raise ProviderBadResponse(f"tool_use {index}: arguments are not JSON") from exc
                arguments = partial  # cut at the output limit: the runtime never runs it
            calls.append(tool_call_from_block({**block, "input": arguments}, index))
        if not self.text and not calls and stop not in _SAYS_WHY_EMPTY:
            raise ProviderBadResponse("empty reply")
        return LLMResponse(
            text=self.text,
            tool_calls=tuple(calls),
            usage=anthropic_usage(self.usage) if self.usage else None,
            finish_reason=self.stop_reason,
            model=self.model,
            reasoning=anthropic_reasoning(content),
            stop=stop,
            refusal=_refusal_text({"stop_details": self.stop_details}) if stop == "refusal" else "",
        )


def _index(data: Mapping[str, Any]) -> int:
    index = data.get("index", 0)
    return index if isinstance(index, int) else 0


__all__ = [
    "API_VERSION",
    "DEFAULT_MAX_TOKENS",
    "MAX_BREAKPOINTS",
    "StreamState",
    "from_response",
    "stream_error",
    "to_request",
]

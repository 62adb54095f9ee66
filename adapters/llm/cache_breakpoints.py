"""The cache plan's breakpoints on the wire: which of the plan's points a request may mark
(`breakpoint_indexes`, both wires) and their marks on chat-completions messages
(`mark_breakpoints`: OpenAI's `prompt_cache_breakpoint`, `cache_control` for OpenRouter and
Qwen). Only a profile that marks breakpoints reaches it.
"""

from __future__ import annotations

from typing import Any

from adapters.llm.dialects import WireOptions, is_gpt56_or_later
from bot.domain.messages import ChatMessage
from bot.ports import LLMRequest

JSON = dict[str, Any]

_MAX_CACHE_CONTROL = 4
"""Anthropic's limit, which OpenRouter passes on; Qwen takes the same number."""
_MAX_OPENAI_BREAKPOINTS = 3
"""GPT-5.6 caches at most four prefixes per request; its implicit breakpoint uses one."""
_OPENAI_BREAKPOINT_ROLES = frozenset({"system", "user", "tool"})
"""OpenAI accepts a breakpoint on these messages' text parts, not on assistant output."""


def breakpoint_indexes(request: LLMRequest, limit: int) -> tuple[int, ...]:
    """The plan's points a wire may mark, oldest first, at most `limit`.

    A point outside the messages, or on the current (last user) message, is refused whatever
    the plan says: its per-turn blocks are dropped next turn, so a write there is never read.
    (A point after it, a tool step of the same turn, is the plan's call: the next step of
    the turn repeats it.) Over the limit, the points the next request reads first win: the
    last stable message, the previous read point, the system prompt, the window head.
    """
    plan = request.cache_plan
    if plan is None:
        return ()
    current = current_index(request.messages)
    ranked = (plan.last_stable, plan.previous_read, plan.system_end, plan.window_head)
    chosen: list[int] = []
    for index in ranked:
        if index is None or index in chosen or index == current:
            continue
        if not 0 <= index < len(request.messages):
            continue
        if len(chosen) < limit:
            chosen.append(index)
    return tuple(sorted(chosen))


def current_index(messages: tuple[ChatMessage, ...]) -> int:
    """The index of the current message: the last user message (the length when none)."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "user":
            return index
    return len(messages)


def mark_breakpoints(messages: list[JSON], request: LLMRequest, options: WireOptions) -> None:
    """Mark the plan's breakpoints on the chat-completions `messages` in the dialect
    `options` name: OpenAI's `prompt_cache_breakpoint` (GPT-5.6 and later) or
    `cache_control` (OpenRouter, Qwen), on each point's last text part."""
    if options.cache_dialect == "openai_breakpoint":
        if not is_gpt56_or_later(request.model):
            return  # older models take no explicit breakpoint; their cache is automatic
        candidates = [
            i for i, m in enumerate(request.messages) if m.role in _OPENAI_BREAKPOINT_ROLES
        ]
        allowed = set(candidates)
        points = [i for i in breakpoint_indexes(request, len(messages)) if i in allowed]
        for index in points[-_MAX_OPENAI_BREAKPOINTS:]:
            part = _last_text_part(messages[index])
            if part is not None:
                part["prompt_cache_breakpoint"] = {"mode": "explicit"}
        return
    marker: JSON = {"type": "ephemeral"}
    if options.cache_ttl == "1h":
        marker["ttl"] = "1h"
    for index in breakpoint_indexes(request, _MAX_CACHE_CONTROL):
        part = _last_text_part(messages[index])
        if part is not None:
            part["cache_control"] = dict(marker)


def _last_text_part(wire: JSON) -> JSON | None:
    """The message's last text part, turning string content into one part; None when the
    message has no text (an assistant message of only tool calls)."""
    content = wire.get("content")
    if isinstance(content, str):
        if not content:
            return None
        part: JSON = {"type": "text", "text": content}
        wire["content"] = [part]
        return part
    if isinstance(content, list):
        for part in reversed(content):
            if isinstance(part, dict) and part.get("type") == "text":
                return part
    return None


__all__ = ("breakpoint_indexes", "current_index", "mark_breakpoints")

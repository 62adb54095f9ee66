"""Tool results: the `tool` message the model reads, the record-time length cap, and old
results shrunk to their conclusion.

`truncate_tool_result` runs once, when a result is recorded (`max_tool_result_chars`); it
never trims history. `shrink_old_tool_results` runs at projection on turns that have ended:
storage keeps the full result, the model sees its first 200 characters. Both are
deterministic, so a shrunk message is byte-identical on every call and stays in the
provider's prefix cache once its turn has ended.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import assert_never

from bot.context.tokens import compute_message_tokens
from bot.context.turns import TOOL_RESULTS_PREFIX
from bot.context.window import UNKNOWN_WINDOW_TOKENS
from bot.domain.ids import Locale
from bot.domain.messages import ChatMessage, ToolCall
from bot.domain.records import ToolResult
from bot.texts import in_locale

IMAGE_MARKER_OPEN = "[IMAGE:"
DEFAULT_MAX_TOOL_RESULT_CHARS = UNKNOWN_WINDOW_TOKENS // 2
"""The default record-time cap (`runtime.max_tool_result_chars`): 16,000 characters.

Chosen against the unknown-window default rather than the other way round: the estimate
counts a CJK character as a whole token, so a capped result of Chinese text is at most
16,000 tokens, half the 32,000 assumed when a route's window is unknown. The system prompt,
the tool schemas and the newest turn still fit beside it (the old 50,000 was ≈50k tokens of
Chinese, over the whole assumed window, refused before sending). English text at the cap is
about 4,000 tokens."""
OLD_RESULT_KEEP_CHARS = 200
"""Characters of an ended turn's tool result (and of each long argument string) kept."""


# ---------------------------------------------------------------- record time


def _marker_span(text: str, cut: int) -> tuple[int, int] | None:
    """The `[IMAGE:...]` marker that `cut` would split, as (start, end exclusive)."""
    start = text.rfind(IMAGE_MARKER_OPEN, 0, cut + len(IMAGE_MARKER_OPEN) - 1)
    if start < 0 or start >= cut:
        return None
    close = text.find("]", start + len(IMAGE_MARKER_OPEN))
    end = len(text) if close < 0 else close + 1
    return (start, end) if cut < end else None


def truncate_tool_result(text: str, max_chars: int) -> str:
    """Cap a result at about `max_chars`: the first 2/3 and the last 1/3, with a note between.

    The note is `\\n\\n[... N characters truncated ...]\\n\\n`, N the characters removed.
    A cut that would split an `[IMAGE:...]` marker moves outside it, so the marker is kept
    whole or dropped whole (never half a path). `max_chars <= 0` turns the cap off.
    """
    if max_chars <= 0 or len(text) <= max_chars:
        return text
    head_end = max_chars * 2 // 3
    tail_start = len(text) - (max_chars - head_end)
    span = _marker_span(text, head_end)
    if span is not None:
        head_end = span[0]
    span = _marker_span(text, tail_start)
    if span is not None:
        tail_start = span[1]
    removed = tail_start - head_end
    return f"{text[:head_end]}\n\n[... {removed} characters truncated ...]\n\n{text[tail_start:]}"


# ---------------------------------------------------------------- projection time


def omitted_note(count: int, locale: Locale) -> str:
    return in_locale(locale, zh=f"…(已省略 {count} 字)", en=f"…({count} chars omitted)")


def shorten(text: str, locale: Locale, keep: int = OLD_RESULT_KEEP_CHARS) -> str:
    """The first `keep` characters and a note of how many were left out; short text as is."""
    if len(text) <= keep:
        return text
    return text[:keep] + omitted_note(len(text) - keep, locale)


def _shorten_json(value: object, locale: Locale) -> object:
    if isinstance(value, str):
        return shorten(value, locale)
    if isinstance(value, list):
        return [_shorten_json(item, locale) for item in value]
    if isinstance(value, dict):
        return {key: _shorten_json(item, locale) for key, item in value.items()}
    return value


def summarize_arguments(arguments: str, locale: Locale) -> str:
    """A call's arguments with every long string value shortened, still valid JSON.

    Unchanged (byte for byte) when nothing is long. Arguments that are not JSON and are
    long become one JSON string of their shortened text.
    """
    try:
        parsed = json.loads(arguments)
    except ValueError:
        if len(arguments) <= OLD_RESULT_KEEP_CHARS:
            return arguments
        return json.dumps(shorten(arguments, locale), ensure_ascii=False)
    summary = _shorten_json(parsed, locale)
    if summary == parsed:
        return arguments
    return json.dumps(summary, ensure_ascii=False)


def _summarize_call(call: ToolCall, locale: Locale) -> ToolCall:
    arguments = summarize_arguments(call.arguments, locale)
    return call if arguments == call.arguments else replace(call, arguments=arguments)


def _shrink(message: ChatMessage, locale: Locale) -> ChatMessage:
    match message.role:
        case "tool":
            content = shorten(message.content, locale)
            if content == message.content:
                return message
            changed = replace(message, content=content)
        case "assistant":
            calls = tuple(_summarize_call(call, locale) for call in message.tool_calls)
            if calls == message.tool_calls:
                return message
            changed = replace(message, tool_calls=calls)
        case "user" if message.content.startswith(TOOL_RESULTS_PREFIX):
            # a legacy carrier of prompt-mode tool results (member text never starts so:
            # it is escaped and follows a header)
            content = shorten(message.content, locale)
            if content == message.content:
                return message
            changed = replace(message, content=content)
        case "system" | "user":
            return message
        case _:
            assert_never(message.role)
    return replace(changed, tokens=compute_message_tokens(changed))


def shrink_old_tool_results(
    messages: Sequence[ChatMessage], *, current_turn_start: int, locale: Locale
) -> tuple[ChatMessage, ...]:
    """Shrink tool results and call arguments of the turns before `current_turn_start`.

    A result over 200 characters keeps its first 200 and `…(已省略 N 字)` /
    `…(N chars omitted)`; `is_error` stays, and so does an error code at the start of the
    text. Calls keep their name and an argument summary. The current turn goes in full.
    Changed messages carry a recomputed estimate.
    """
    end = min(max(current_turn_start, 0), len(messages))
    return (*(_shrink(m, locale) for m in messages[:end]), *messages[end:])


def tool_result_message(result: ToolResult) -> ChatMessage:
    """The `tool` message the model reads for a result, the same in the turn that ran it and
    every later one: an error reads `error[<code>]: <content>` (the prefix is added here
    only; a result stored with it already, as older versions did, keeps one)."""
    content = result.content
    if result.is_error:
        prefix = f"error[{result.error_code}]: " if result.error_code else "error: "
        if not content.startswith(prefix):
            content = prefix + content
    return ChatMessage(
        role="tool",
        content=content,
        tool_call_id=result.call_id,
        name=result.name,
        is_error=result.is_error,
    )

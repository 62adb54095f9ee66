"""Turns, and the tool messages inside them: where a turn starts, and the repair of tool
calls and results without their partner.

Turn grouping: a turn starts at a real user message and runs to the next one.

Not a turn start: system messages, the breadcrumb (by its flag, never its text), a user
message whose text starts exactly with `[Tool results]` (prompt-mode tool results belong to
the previous turn), and a user message merged into the previous turn (`continues_turn`).

Orphaned tool messages (`remove_orphaned_tool_messages`), the last safety net for
inconsistent histories: whole-turn trimming never creates an orphan; this repairs histories
that arrive broken (restored or externally edited sessions). The pairing rule is the one
providers enforce: the results of an assistant message's calls are the `tool` messages that
directly follow it (in any order, parallel calls included). So a result is kept only when it
answers a still unanswered call of the nearest preceding assistant message with no other
message in between, and a call is kept only when it got such a result. An assistant message
that loses all its calls and has no text is dropped; one that loses some calls is rebuilt
with the answered ones, in their original order, and its cached estimate recomputed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from bot.context.tokens import compute_message_tokens
from bot.domain.messages import ChatMessage

TOOL_RESULTS_PREFIX = "[Tool results]"


def is_turn_start(message: ChatMessage) -> bool:
    return (
        message.role == "user"
        and not message.is_breadcrumb
        and not message.continues_turn
        and not message.content.startswith(TOOL_RESULTS_PREFIX)
    )


def leading_system_count(messages: Sequence[ChatMessage]) -> int:
    """How many system messages open the list."""
    count = 0
    for message in messages:
        if message.role != "system":
            break
        count += 1
    return count


def turn_starts(messages: Sequence[ChatMessage], begin: int = 0) -> list[int]:
    """Indexes (from `begin`) where turns start. Messages before the first start, if any,
    are an orphan prefix that belongs to no turn."""
    return [i for i in range(begin, len(messages)) if is_turn_start(messages[i])]


def count_turns(messages: Sequence[ChatMessage], begin: int = 0) -> int:
    """How many turns start at or after `begin`."""
    return sum(1 for i in range(begin, len(messages)) if is_turn_start(messages[i]))


def remove_orphaned_tool_messages(messages: Sequence[ChatMessage]) -> tuple[ChatMessage, ...]:
    """The history without unpaired tool results and tool calls; unchanged when consistent."""
    keep = [True] * len(messages)
    answered: dict[int, set[str]] = {}  # assistant index -> call ids that got a result
    open_calls: set[str] = set()
    owner = -1  # index of the assistant message whose results may follow
    for i, message in enumerate(messages):
        if message.role == "tool":
            call_id = message.tool_call_id
            if call_id is not None and call_id in open_calls:
                open_calls.discard(call_id)
                answered[owner].add(call_id)
            else:
                keep[i] = False
            continue
        open_calls = set()
        owner = -1
        if message.role == "assistant" and message.tool_calls:
            owner = i
            open_calls = {call.id for call in message.tool_calls}
            answered[i] = set()

    out: list[ChatMessage] = []
    for i, message in enumerate(messages):
        if not keep[i]:
            continue
        done = answered.get(i)
        if done is None or len(done) == len(message.tool_calls):
            out.append(message)
            continue
        # a repeated call id is answered at most once: keep its first occurrence only
        calls = []
        for call in message.tool_calls:
            if call.id in done:
                calls.append(call)
                done = done - {call.id}
        if not calls and not message.content.strip():
            continue
        rebuilt = replace(message, tool_calls=tuple(calls), tokens=None)
        out.append(replace(rebuilt, tokens=compute_message_tokens(rebuilt)))
    return tuple(out)

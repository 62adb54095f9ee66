"""The last safety net for inconsistent histories: tool results and tool calls without a partner.

Whole-turn trimming never creates an orphan; this repairs histories that arrive broken
(restored or externally edited sessions). The pairing rule is the one providers enforce:
the results of an assistant message's calls are the `tool` messages that directly follow
it (in any order, parallel calls included). So a result is kept only when it answers a
still unanswered call of the nearest preceding assistant message with no other message in
between, and a call is kept only when it got such a result. An assistant message that loses
all its calls and has no text is dropped; one that loses some calls is rebuilt with the
answered ones, in their original order, and its cached estimate recomputed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from bot.context.tokens import compute_message_tokens
from bot.domain.messages import ChatMessage


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

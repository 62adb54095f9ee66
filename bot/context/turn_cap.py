"""The turn cap: keep the newest whole turns of a history, on the provider-facing list
(`trim_to_recent_turn_count`) or on structured, stored history that may hold system rows
anywhere (`trim_conversation_to_recent_turns`).

Both answer a `TrimResult` and follow `bot.context.history_trim`'s rules: the newest whole
turn is always kept, no turn is split, an orphan prefix leaves with the first turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from bot.context.history_trim import TrimResult, cut_result, protected_prefix, unchanged
from bot.context.tokens import compute_message_tokens, estimate_history_tokens, estimate_span_tokens
from bot.context.turns import is_turn_start, leading_system_count
from bot.domain.messages import ChatMessage


def trim_to_recent_turn_count(
    messages: Sequence[ChatMessage], max_turns: int, *, crumb_present: bool = False
) -> TrimResult:
    """Keep the newest `max(max_turns, 1)` whole turns; unchanged when there are no more."""
    keep = max(max_turns, 1)
    n = len(messages)
    prefix = protected_prefix(messages, crumb_present)
    acc = 0
    seen = 0
    cut = cut_tokens = -1
    for i in range(n - 1, prefix - 1, -1):
        message = messages[i]
        if is_turn_start(message):
            seen += 1
            if seen > keep:
                head = estimate_span_tokens(messages, 0, prefix)
                return cut_result(messages, prefix, cut, turns=keep, tokens=head + cut_tokens)
        cached = message.tokens
        acc += compute_message_tokens(message) if cached is None else cached
        if seen == keep and cut < 0:
            cut, cut_tokens = i, acc
    return unchanged(messages, turns=seen, tokens=acc + estimate_span_tokens(messages, 0, prefix))


def trim_conversation_to_recent_turns(
    messages: Sequence[ChatMessage], max_turns: int, *, crumb_present: bool = False
) -> TrimResult:
    """The turn cap on structured history, which may hold system rows anywhere.

    Defined over `ChatMessage` so both history shapes share one turn rule. When it trims,
    every system row (wherever it stood) is hoisted to the front in order, every breadcrumb
    is dropped (the caller inserts a fresh one after the system rows), and the newest
    `max(max_turns, 1)` turns follow. Unchanged (no hoisting) when there are no more turns.
    """
    keep = max(max_turns, 1)
    s = leading_system_count(messages)
    unflagged_crumb = s if crumb_present and s < len(messages) else -1

    def is_crumb(index: int) -> bool:
        return index == unflagged_crumb or messages[index].is_breadcrumb

    seen = 0
    cut = -1
    for i in range(len(messages) - 1, -1, -1):
        if is_turn_start(messages[i]) and i != unflagged_crumb:
            seen += 1
            if seen == keep:
                cut = i
            elif seen > keep:
                break
    if seen <= keep:
        return unchanged(messages, turns=seen, tokens=estimate_history_tokens(messages))
    system = tuple(m for m in messages if m.role == "system")
    kept = tuple(
        m for i, m in enumerate(messages[cut:], start=cut) if m.role != "system" and not is_crumb(i)
    )
    # an unflagged crumb leaves flagged, so the dropped figures do not count it as a turn
    dropped = tuple(
        replace(m, is_breadcrumb=True) if i == unflagged_crumb else m
        for i, m in enumerate(messages)
        if m.role != "system" and (i < cut or is_crumb(i))
    )
    result = (*system, *kept)
    return TrimResult(
        messages=result,
        dropped=dropped,
        kept_turns=keep,
        tokens_after=estimate_history_tokens(result),
    )

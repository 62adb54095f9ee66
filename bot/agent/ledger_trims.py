"""A history trim as a ledger line keeps it: what one trim before a model call did
(`TrimInfo`) and its JSON (`trim_to_json`, also the dashboard's live feed);
`bot.agent.ledger_read` decodes it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True, kw_only=True)
class TrimInfo:
    """What a history trim did before this call (see `HistoryTrimmed`)."""

    reason: str
    dropped_turns: int
    dropped_messages: int
    kept_turns: int
    tokens_before: int
    tokens_after: int
    budget: int


def trim_to_json(trim: TrimInfo) -> dict[str, Any]:
    """A trim as the ledger line (and the dashboard's live feed) writes it."""
    return {
        "reason": trim.reason,
        "dropped_turns": trim.dropped_turns,
        "dropped_messages": trim.dropped_messages,
        "kept_turns": trim.kept_turns,
        "tokens_before": trim.tokens_before,
        "tokens_after": trim.tokens_after,
        "budget": trim.budget,
    }

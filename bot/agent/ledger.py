"""The usage ledger's line: one model call (`LedgerEntry`) and its JSON.

Every key of `LedgerEntry` is written (`null` where unknown), one JSON object per line, at
most `MAX_LINE_BYTES` encoded (the error text is shortened first). `bot.agent.ledger_file`
writes the day files; `bot.agent.ledger_read` holds the one decoder of a line
(`entry_from_json`) and the scan over the day files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal

from bot.agent.ledger_trims import TrimInfo, trim_to_json

Purpose = Literal[
    "turn",
    "final_summary",
    "recovery_retry",
    "compaction",
    "transcription",
    "judge",
    "catchup",
    "job",
]
PURPOSES: tuple[Purpose, ...] = (
    "turn", "final_summary", "recovery_retry", "compaction", "transcription", "judge", "catchup",
    "job",
)  # fmt: skip
Stop = Literal["end", "length", "refusal", "tool_calls", "context"]
STOPS: tuple[Stop, ...] = ("end", "length", "refusal", "tool_calls", "context")

MAX_LINE_BYTES = 4096
"""Upper bound of one encoded line; keeps each append a single small write."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerEntry:
    """One model call.

    `input_tokens` / `cached_tokens` / `cache_write_tokens` / `output_tokens` are what the
    provider reported (`None` when it did not). `input_tokens` is the whole billed input:
    cache reads (`cached_tokens`) and cache writes (`cache_write_tokens`) are parts of it;
    lines from before writes were read have no `cache_write_tokens` and read as 0 writes.
    `cost` is the call's whole cost at the route's prices, `cache_write_cost` the part of it
    the cache writes took (both `None` without a report). `input_truncated_by_provider`
    marks a call whose reported input was far below what we sent (an Ollama-style silent
    truncation, see `bot.agent.metering`). `est_*` is our own estimate of the
    input, split into fixed (system prompt + tool schemas), history (window messages),
    current (per-turn context + current message) and images; `est_corrected` is the total as
    budgets and the capacity check saw it (scaled by the route's learned correction, or the
    exact count of the route's tokenizer file; `None` on lines from before it existed).
    `trims` are every history trim made before this call since the previous one, in order
    (a window move and a proactive trim of one call are two); `trim` is the last. `error` is
    the error class and a short message, passed through `describe_error` so no secret lands
    on disk. `stop` is why the model stopped (`end`, `length`, `refusal`, `tool_calls`,
    `context`; `None` when the call got no answer or the provider did not say);
    `reasoning_tokens` the part of `output_tokens` spent thinking; `cache_write_1h_tokens` the
    part of `cache_write_tokens` written for 1 hour (priced apart, see `Prices`).
    """

    ts: datetime
    session: int
    chat: int
    thread: int = 0
    scene: str
    turn_id: str
    iteration: int = 1
    purpose: Purpose = "turn"
    provider: str
    model: str
    input_tokens: int | None = None
    cached_tokens: int | None = None
    output_tokens: int | None = None
    est_fixed: int = 0
    est_history: int = 0
    est_current: int = 0
    est_images: int = 0
    est_corrected: int | None = None
    trims: tuple[TrimInfo, ...] = ()
    latency_ms: int = 0
    error: str | None = None
    hit_iteration_cap: bool = False
    cost: float | None = None
    tool_calls: int = 0
    cache_write_tokens: int | None = None
    cache_write_cost: float | None = None
    input_truncated_by_provider: bool = False
    call_id: str = ""
    """Names the call's trace (`bot.agent.traces`); empty on lines from before traces."""
    stop: Stop | None = None
    reasoning_tokens: int | None = None
    cache_write_1h_tokens: int | None = None
    mcp_tool_calls: int = 0
    """How many of `tool_calls` name a tool of an MCP server (`<server>__<tool>`)."""
    refused: str | None = None
    """`budget`: the call was not made, a spend limit was reached (`bot.agent.spend`)."""
    images: int = 0
    """Images the call sent (the current turn's, and tool results' `view_image`); their
    tokens are `est_images`."""
    route: str = ""
    """The profile that took the call (empty on lines from before fallback chains)."""
    fallback_from: str | None = None
    """The session's own profile, when the call went to one of its fallbacks."""

    def __post_init__(self) -> None:
        if self.ts.tzinfo is None or self.ts.utcoffset() is None:
            raise ValueError("LedgerEntry.ts must be timezone-aware")

    @property
    def trim(self) -> TrimInfo | None:
        """The last trim before this call (what older lines carried as `trim`)."""
        return self.trims[-1] if self.trims else None

    @property
    def est_total(self) -> int:
        return self.est_fixed + self.est_history + self.est_current + self.est_images

    def to_dict(self) -> dict[str, Any]:
        trims = [trim_to_json(trim) for trim in self.trims]
        return {
            "ts": self.ts.astimezone(UTC).isoformat(timespec="milliseconds"),
            "session": self.session,
            "chat": self.chat,
            "thread": self.thread,
            "scene": self.scene,
            "turn_id": self.turn_id,
            "iteration": self.iteration,
            "purpose": self.purpose,
            "provider": self.provider,
            "model": self.model,
            "input_tokens": self.input_tokens,
            "cached_tokens": self.cached_tokens,
            "output_tokens": self.output_tokens,
            "est_fixed": self.est_fixed,
            "est_history": self.est_history,
            "est_current": self.est_current,
            "est_images": self.est_images,
            "est_corrected": self.est_corrected,
            "trims": trims,
            "latency_ms": self.latency_ms,
            "error": self.error,
            "hit_iteration_cap": self.hit_iteration_cap,
            "cost": self.cost,
            "tool_calls": self.tool_calls,
            "cache_write_tokens": self.cache_write_tokens,
            "cache_write_cost": self.cache_write_cost,
            "input_truncated_by_provider": self.input_truncated_by_provider,
            "call_id": self.call_id,
            "stop": self.stop,
            "reasoning_tokens": self.reasoning_tokens,
            "cache_write_1h_tokens": self.cache_write_1h_tokens,
            "mcp_tool_calls": self.mcp_tool_calls,
            "refused": self.refused,
            "images": self.images,
            "route": self.route,
            "fallback_from": self.fallback_from,
        }

    def to_json_line(self) -> str:
        """The entry as one JSON line, newline included, at most `MAX_LINE_BYTES` encoded."""
        line = json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n"
        if len(line.encode()) <= MAX_LINE_BYTES:
            return line
        shorter = replace(
            self,
            error=None if self.error is None else self.error[:80],
            scene=self.scene[:40],
            turn_id=self.turn_id[:80],
            provider=self.provider[:80],
            model=self.model[:120],
        )
        return json.dumps(shorter.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n"

"""The usage ledger's line: one model call (`LedgerEntry`), its JSON and its one decoder.

Every key of `LedgerEntry` is written (`null` where unknown), one JSON object per line, at
most `MAX_LINE_BYTES` encoded (the error text is shortened first). `from_json` is the one
decoder of a line, driven by a table of one reader per field; it accepts lines with missing
optional keys, so older or hand-made lines stay readable. `bot.agent.ledger_file` writes the
day files and scans them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from operator import call, contains, itemgetter
from typing import Any, Literal, cast

from bot.redact import scrub

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

MAX_ERROR_CHARS = 300


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

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LedgerEntry:
        """Parse one decoded line; only `ts` is required. Raises `ValueError` on bad shapes.

        The one decoder of the format, driven by `_TABLE`. The usage report reads a month of
        lines through it, so a line as `LedgerWriter` writes it (every key, each value of the
        JSON type `to_dict` writes) is taken as it is, checked by type in one pass; any other
        goes through each field's reader (`_tolerant`). Both agree.
        """
        try:
            values = list(_every_key(data))
        except KeyError:  # an older or hand-made line
            return _assemble(_tolerant(data))
        if all(map(contains, _KINDS, map(type, values))):  # as written: taken as it is
            for at in (_TS, _PURPOSE, _TRIMS, _STOP):  # checked further than by their type
                values[at] = _READERS[at](values[at])
        else:
            values = _tolerant(data)
        return _assemble(values)


def _tolerant(data: Mapping[str, Any]) -> list[Any]:
    """The values of any line, each through its field's reader: a missing key reads as
    `null`, numbers of the other JSON kind convert, `null` strings read as empty. Two keys of
    older lines: `trim` (the last trim only, before `trims`) and a missing
    `cache_write_tokens` beside a reported input (the provider reported no writes: 0)."""
    values = list(map(call, _READERS, map(data.get, _KEYS)))
    if data.get("trims") is None:  # an older line: the last trim only, as `trim` (if any)
        trim = data.get("trim")
        values[_TRIMS] = () if trim is None else _trims([trim])
    if "cache_write_tokens" not in data and values[_INPUT] is not None:
        values[_WRITES] = 0
    return values


# The readers test the exact JSON type first: one runs for every field of every line.


def _ts(value: Any) -> datetime:
    ts = datetime.fromisoformat(value) if type(value) is str else None
    if ts is None or ts.tzinfo is None:
        raise ValueError("ledger line without a valid ts")
    return ts


def _int(value: Any, default: int = 0) -> int:
    if type(value) is int:
        return value
    if value is None:
        return default
    if type(value) is float:
        return int(value)
    raise ValueError(f"expected a number, got {value!r}")


def _iteration(value: Any) -> int:
    return _int(value, 1)


def _opt_int(value: Any) -> int | None:
    if type(value) is int or value is None:
        return value
    return _int(value)


def _opt_float(value: Any) -> float | None:
    if type(value) is float or value is None:
        return value
    if type(value) is int:
        return float(value)
    raise ValueError(f"expected a number, got {value!r}")


def _str(value: Any) -> str:
    return value if type(value) is str else str(value or "")


def _opt_str(value: Any) -> str | None:
    return value if type(value) is str or value is None else _str(value)


def _error(value: Any) -> str | None:
    return value if type(value) is str or value is None else str(value)


def _purpose(value: Any) -> Purpose:
    purpose = value or "turn"
    if purpose not in PURPOSES:
        raise ValueError(f"unknown purpose {purpose!r}")
    return cast(Purpose, purpose)


def _stop(value: Any) -> Stop | None:
    if value is not None and value not in STOPS:
        raise ValueError(f"unknown stop {value!r}")
    return cast(Stop | None, value)


def _trims(value: Any) -> tuple[TrimInfo, ...]:
    if value is None:
        return ()
    if type(value) is not list:
        raise ValueError("trims must be a list")
    return tuple(map(_trim_from_json, value))


_NONE: type = type(None)
_INT: frozenset[type] = frozenset({int})
_OPT_INT: frozenset[type] = frozenset({int, _NONE})
_FLAG: frozenset[type] = frozenset({bool})
_TEXT: frozenset[type] = frozenset({str})
_OPT_TEXT: frozenset[type] = frozenset({str, _NONE})
_OPT_FLOAT: frozenset[type] = frozenset({float, _NONE})
_LIST: frozenset[type] = frozenset({list})

_TABLE: tuple[tuple[str, frozenset[type], Callable[[Any], Any]], ...] = (
    ("ts", _TEXT, _ts),
    ("session", _INT, _int),
    ("chat", _INT, _int),
    ("thread", _INT, _int),
    ("scene", _TEXT, _str),
    ("turn_id", _TEXT, _str),
    ("iteration", _INT, _iteration),
    ("purpose", _TEXT, _purpose),
    ("provider", _TEXT, _str),
    ("model", _TEXT, _str),
    ("input_tokens", _OPT_INT, _opt_int),
    ("cached_tokens", _OPT_INT, _opt_int),
    ("output_tokens", _OPT_INT, _opt_int),
    ("est_fixed", _INT, _int),
    ("est_history", _INT, _int),
    ("est_current", _INT, _int),
    ("est_images", _INT, _int),
    ("est_corrected", _OPT_INT, _opt_int),
    ("trims", _LIST, _trims),
    ("latency_ms", _INT, _int),
    ("error", _OPT_TEXT, _error),
    ("hit_iteration_cap", _FLAG, bool),
    ("cost", _OPT_FLOAT, _opt_float),
    ("tool_calls", _INT, _int),
    ("cache_write_tokens", _OPT_INT, _opt_int),
    ("cache_write_cost", _OPT_FLOAT, _opt_float),
    ("input_truncated_by_provider", _FLAG, bool),
    ("call_id", _TEXT, _str),
    ("stop", _OPT_TEXT, _stop),
    ("reasoning_tokens", _OPT_INT, _opt_int),
    ("cache_write_1h_tokens", _OPT_INT, _opt_int),
    ("mcp_tool_calls", _INT, _int),
    ("refused", _OPT_TEXT, _opt_str),
    ("images", _INT, _int),
    ("route", _TEXT, _str),
    ("fallback_from", _OPT_TEXT, _opt_str),
)
"""Every field of `LedgerEntry`: its key on the line, the JSON types `to_dict` writes its
value as, and the reader of any value."""
_KEYS = tuple(key for key, _, _ in _TABLE)
_KINDS = tuple(kinds for _, kinds, _ in _TABLE)
_READERS = tuple(read for _, _, read in _TABLE)
_every_key = itemgetter(*_KEYS)
_TS, _PURPOSE, _TRIMS, _STOP, _INPUT, _WRITES = map(
    _KEYS.index, ("ts", "purpose", "trims", "stop", "input_tokens", "cache_write_tokens")
)
_SLOT_SETTERS = tuple(getattr(LedgerEntry, key).__set__ for key in _KEYS)
_new_entry = object.__new__


def _assemble(values: list[Any]) -> LedgerEntry:
    """A `LedgerEntry` from values its readers checked, set slot by slot.

    Half the cost of `LedgerEntry(**fields)` (keyword binding and the frozen `__setattr__`
    calls dominate it); only `from_json` uses it, after `_ts` checked what `__post_init__`
    would.
    """
    entry: LedgerEntry = _new_entry(LedgerEntry)
    for set_slot, value in zip(_SLOT_SETTERS, values, strict=True):
        set_slot(entry, value)
    return entry


def describe_error(exc: BaseException) -> str:
    """`ClassName: short message` for the ledger, with token-like substrings redacted."""
    text = scrub(" ".join(str(exc).split()))
    if len(text) > MAX_ERROR_CHARS:
        text = text[: MAX_ERROR_CHARS - 1] + "…"
    name = type(exc).__name__
    return f"{name}: {text}" if text else name


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


def _trim_from_json(data: Any) -> TrimInfo:
    if not isinstance(data, dict):
        raise ValueError("trim must be an object")
    get = data.get
    return TrimInfo(
        reason=str(get("reason") or ""),
        dropped_turns=_int(get("dropped_turns")),
        dropped_messages=_int(get("dropped_messages")),
        kept_turns=_int(get("kept_turns")),
        tokens_before=_int(get("tokens_before")),
        tokens_after=_int(get("tokens_after")),
        budget=_int(get("budget")),
    )

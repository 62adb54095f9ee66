from __future__ import annotations

import json
from dataclasses import FrozenInstanceError, fields, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bot.agent.error_text import describe_error
from bot.agent.ledger import MAX_LINE_BYTES, LedgerEntry
from bot.agent.ledger_read import entry_from_json
from bot.agent.ledger_trims import TrimInfo

SHANGHAI = ZoneInfo("Asia/Shanghai")
T0 = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[2]


def entry(**changes: object) -> LedgerEntry:
    values: dict[str, object] = {
        "ts": T0,
        "session": 7,
        "chat": -100123,
        "thread": 3,
        "scene": "group",
        "turn_id": "turn-1",
        "provider": "deepseek",
        "model": "deepseek-chat",
    }
    values.update(changes)
    return LedgerEntry(**values)  # type: ignore[arg-type]


FULL = entry(
    iteration=2,
    purpose="recovery_retry",
    input_tokens=9_500,
    cached_tokens=6_000,
    output_tokens=320,
    est_fixed=2_000,
    est_history=5_000,
    est_current=2_100,
    est_images=85,
    trims=(
        TrimInfo(
            reason="token_budget",
            dropped_turns=2,
            dropped_messages=7,
            kept_turns=12,
            tokens_before=11_000,
            tokens_after=7_400,
            budget=8_000,
        ),
    ),
    latency_ms=1_234,
    error="ContextOverflow: prompt too long",
    hit_iteration_cap=True,
    cost=0.00123,
    tool_calls=2,
    cache_write_tokens=1_500,
    cache_write_cost=0.0005625,
    input_truncated_by_provider=True,
    stop="length",
    reasoning_tokens=120,
    cache_write_1h_tokens=1_000,
)


def test_a_line_round_trips() -> None:
    line = FULL.to_json_line()
    assert line.endswith("\n")
    assert line.count("\n") == 1
    assert entry_from_json(json.loads(line)) == FULL
    assert FULL.est_total == 9_185


def test_timestamps_are_written_in_utc() -> None:
    local = entry(ts=datetime(2026, 3, 2, 1, 30, tzinfo=SHANGHAI))
    data = json.loads(local.to_json_line())
    assert data["ts"] == "2026-03-01T17:30:00.000+00:00"


def test_missing_optional_keys_take_defaults() -> None:
    parsed = entry_from_json({"ts": "2026-03-01T10:00:00+00:00", "turn_id": "t"})
    assert parsed.ts == T0
    assert parsed.iteration == 1
    assert parsed.purpose == "turn"
    assert parsed.input_tokens is None
    assert parsed.trim is None
    assert parsed.est_total == 0
    assert parsed.hit_iteration_cap is False


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"ts": "2026-03-01T10:00:00"},
        {"ts": 12345},
        {"ts": "2026-03-01T10:00:00+00:00", "purpose": "chat"},
        {"ts": "2026-03-01T10:00:00+00:00", "input_tokens": "900"},
        {"ts": "2026-03-01T10:00:00+00:00", "est_history": True},
        {"ts": "2026-03-01T10:00:00+00:00", "trim": [1, 2]},
    ],
    ids=["no-ts", "naive-ts", "ts-not-text", "bad-purpose", "text-tokens", "bool-tokens", "trim"],
)
def test_bad_shapes_are_rejected(data: dict[str, object]) -> None:
    with pytest.raises((ValueError, KeyError)):
        entry_from_json(data)


def written(**changes: object) -> dict[str, object]:
    """FULL as the writer puts it on disk and `json` reads it back, with `changes`."""
    data: dict[str, object] = json.loads(FULL.to_json_line())
    data.update(changes)
    return data


@pytest.mark.parametrize(
    "changes",
    [
        {"ts": "2026-03-01T10:00:00"},
        {"ts": 12345},
        {"purpose": "chat"},
        {"input_tokens": "900"},
        {"est_history": True},
        {"session": None, "chat": "x"},
        {"trims": [[1, 2]]},
        {"trims": [{"reason": "r", "budget": "big"}]},
        {"trims": {"reason": "r"}},
        {"cost": "free"},
        {"stop": "paused"},
    ],
    ids=[
        "naive-ts",
        "ts-not-text",
        "bad-purpose",
        "text-tokens",
        "bool-tokens",
        "text-chat",
        "trim-list",
        "trim-text-budget",
        "trims-not-a-list",
        "text-cost",
        "unknown-stop",
    ],
)
def test_bad_values_in_a_complete_line_are_rejected(changes: dict[str, object]) -> None:
    with pytest.raises(
        ValueError,
        match=r"valid ts|purpose|expected a number|must be an object|must be a list|stop",
    ):
        entry_from_json(written(**changes))


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (written(), FULL),
        (dict(reversed(written().items())), FULL),
        ({k: v for k, v in written().items() if k != "thread"}, replace(FULL, thread=0)),
        (written(cost=2, input_tokens=9_500.0), replace(FULL, cost=2.0)),
        (
            written(scene=None, model=None, error=None),
            replace(FULL, scene="", model="", error=None),
        ),
        (
            written(hit_iteration_cap=None, trims=[]),
            replace(FULL, hit_iteration_cap=False, trims=()),
        ),
        (
            {**{k: v for k, v in written().items() if k != "trims"}, "trim": written()["trims"][0]},  # type: ignore[index]
            FULL,
        ),
        (written(session=7.9, iteration=None), replace(FULL, session=7, iteration=1)),
    ],
    ids=[
        "as-written",
        "keys-reordered",
        "key-missing",
        "other-number-kind",
        "null-text",
        "null-flag",
        "line-before-every-trim-was-kept",
        "odd-ints",
    ],
)
def test_every_line_shape_decodes_to_the_same_entry(
    data: dict[str, object], expected: LedgerEntry
) -> None:
    """A complete, plainly typed line takes the quick path; the rest the tolerant path."""
    assert entry_from_json(data) == expected


def test_decoded_entries_are_ordinary_frozen_entries() -> None:
    decoded = entry_from_json(written())
    assert [f.name for f in fields(decoded)] == list(written())  # the writer's key order
    assert decoded == FULL
    with pytest.raises(FrozenInstanceError):
        decoded.session = 8  # type: ignore[misc]


def test_a_naive_timestamp_is_refused() -> None:
    with pytest.raises(ValueError, match="aware"):
        entry(ts=datetime(2026, 3, 1, 10, 0))


def test_describe_error_names_the_class_and_redacts_secrets() -> None:
    exc = RuntimeError(
        "401 for https://api.telegram.org/bot123456:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/send "
        "with key sk-abcdefghijklmnop and Authorization: Bearer abc.def.ghi.jkl"
    )
    text = describe_error(exc)
    assert text.startswith("RuntimeError: 401")
    assert "AAHdqTcv" not in text
    assert "sk-abcdef" not in text
    assert "abc.def.ghi" not in text
    assert text.count("[redacted]") == 3
    assert len(describe_error(ValueError("x" * 10_000))) < 400
    assert describe_error(ValueError()) == "ValueError"


def test_an_oversized_entry_is_shortened_to_one_small_line() -> None:
    big = entry(model="m" * 5_000, error="E: " + "y" * 5_000)
    line = big.to_json_line()
    assert len(line.encode()) <= MAX_LINE_BYTES
    assert entry_from_json(json.loads(line)).model == "m" * 120


def test_other_offsets_parse_to_the_same_instant() -> None:
    parsed = entry_from_json({"ts": "2026-03-01T18:00:00+08:00"})
    assert parsed.ts == T0
    assert parsed.ts.utcoffset() == timedelta(hours=8)


def test_a_line_from_before_cache_writes_reads_as_no_writes() -> None:
    """Lines written before `cache_write_tokens` existed: the provider reported no writes."""
    old = {
        k: v
        for k, v in written().items()
        if k not in {"cache_write_tokens", "cache_write_cost", "input_truncated_by_provider"}
    }
    decoded = entry_from_json(old)
    assert decoded.cache_write_tokens == 0
    assert decoded.cache_write_cost is None
    assert decoded.input_truncated_by_provider is False
    assert decoded.input_tokens == FULL.input_tokens
    unanswered = entry_from_json({**old, "input_tokens": None})
    assert unanswered.cache_write_tokens is None  # no report at all: unknown, not zero


def test_cache_writes_and_the_truncation_flag_are_written_on_every_line() -> None:
    data = json.loads(FULL.to_json_line())
    assert data["cache_write_tokens"] == 1_500
    assert data["cache_write_cost"] == 0.0005625
    assert data["input_truncated_by_provider"] is True
    plain = json.loads(entry().to_json_line())
    assert plain["cache_write_tokens"] is None
    assert plain["input_truncated_by_provider"] is False


def test_stop_reasoning_and_hour_writes_are_on_every_line_and_unknown_on_older_ones() -> None:
    data = json.loads(FULL.to_json_line())
    assert (data["stop"], data["reasoning_tokens"], data["cache_write_1h_tokens"]) == (
        "length",
        120,
        1_000,
    )
    plain = json.loads(entry().to_json_line())
    assert {"stop", "reasoning_tokens", "cache_write_1h_tokens"} <= plain.keys()
    old = {
        k: v
        for k, v in written().items()
        if k not in {"stop", "reasoning_tokens", "cache_write_1h_tokens"}
    }
    decoded = entry_from_json(old)
    assert (decoded.stop, decoded.reasoning_tokens, decoded.cache_write_1h_tokens) == (
        None,
        None,
        None,
    )

from __future__ import annotations

import logging
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from bot.agent.ledger import LedgerEntry
from bot.domain.ids import Locale
from bot.errors import TelegramNetworkError
from bot.services.daily_summary import DailySummary, format_summary_text
from bot.services.usage_report import build_report
from testkit.memory_store import InMemoryStore
from tests.fakes import RecordingMessenger, SteppingClock, claimed_days
from tests.test_services.ledger_days import SHANGHAI, write_ledger
from tests.test_services.ledger_days import call as ledger_call

OWNER = 4242
# 00:30 on 2026-03-02 in Shanghai; still 2026-03-01 in UTC.
NOW = datetime(2026, 3, 1, 16, 30, tzinfo=UTC)
YESTERDAY = date(2026, 3, 1)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def call(ts: datetime, turn: str, **changes: object) -> LedgerEntry:
    """A ledger line of a 9.8k-token call costing 0.25 (half of it cached)."""
    typical: dict[str, object] = {
        "input_tokens": 9_800,
        "cached_tokens": 4_900,
        "output_tokens": 200,
        "est_fixed": 2_000,
        "est_history": 4_000,
        "est_current": 4_000,
        "cost": 0.25,
    }
    return ledger_call(ts, turn, **{**typical, **changes})


@pytest.fixture
def traces(tmp_path: Path) -> Path:
    traces = tmp_path / "agent-traces"
    write_ledger(
        traces,
        [
            # 2026-03-01 in Shanghai: two turns, three calls, one hits the cap.
            call(datetime(2026, 3, 1, 1, 0, tzinfo=UTC), "a"),
            call(datetime(2026, 3, 1, 2, 0, tzinfo=UTC), "b"),
            call(datetime(2026, 3, 1, 2, 1, tzinfo=UTC), "b", hit_iteration_cap=True),
            # 2026-03-02 00:10 in Shanghai (today): not part of yesterday.
            call(datetime(2026, 3, 1, 16, 10, tzinfo=UTC), "c"),
        ],
    )
    return traces


def summary(
    traces: Path, messenger: RecordingMessenger, guard: InMemoryStore, locale: Locale = "en"
) -> DailySummary:
    return DailySummary(
        traces, SHANGHAI, OWNER, messenger, guard, SteppingClock(NOW), locale=locale
    )


async def test_the_cost_carries_the_configured_currency(traces: Path) -> None:
    messenger = RecordingMessenger()
    daily = DailySummary(
        traces,
        SHANGHAI,
        OWNER,
        messenger,
        InMemoryStore(),
        SteppingClock(NOW),
        locale="en",
        currency="CNY",
    )
    assert await daily.send_yesterday() is True
    assert "cost 0.7500 CNY" in messenger.sent[0].text


def test_yesterday_is_the_calendar_day_before_now_in_the_bot_zone(traces: Path) -> None:
    assert summary(traces, RecordingMessenger(), InMemoryStore()).yesterday() == YESTERDAY


async def test_sends_yesterdays_text_and_chart_to_the_owner(traces: Path) -> None:
    messenger, guard = RecordingMessenger(), InMemoryStore()
    assert await summary(traces, messenger, guard).send_yesterday() is True
    assert claimed_days(guard) == {YESTERDAY}
    [(chat, text)] = [(m.chat_id, m.text) for m in messenger.sent]
    assert chat == OWNER
    assert text.splitlines()[0] == "Usage for 2026-03-01 (Asia/Shanghai)"
    assert "Calls: 3 in 2 turns (1.5 per turn); 1 hit the iteration cap" in text
    assert "p50 9.8k / p90 9.8k" in text
    assert "Cache hit 50%" in text
    assert "cost 0.7500" in text
    [(photo_chat, photo)] = messenger.photos
    [caption] = messenger.captions
    assert photo_chat == OWNER
    assert photo.startswith(PNG_MAGIC)
    assert "7 days" in caption


async def test_a_claimed_day_sends_nothing_from_a_second_process(traces: Path) -> None:
    guard = InMemoryStore()  # the shared database
    first, second = RecordingMessenger(), RecordingMessenger()
    assert await summary(traces, first, guard).send_for(YESTERDAY) is True
    assert await summary(traces, second, guard).send_for(YESTERDAY) is False
    assert (second.sent, second.photos) == ([], [])
    assert len(first.sent) == 1


async def test_a_failed_send_is_logged_and_keeps_the_claim(
    traces: Path, caplog: pytest.LogCaptureFixture
) -> None:
    guard = InMemoryStore()
    broken = RecordingMessenger(fail_text=TelegramNetworkError("Bot API unreachable"))
    with caplog.at_level(logging.ERROR, logger="bot.services.daily_summary"):
        assert await summary(traces, broken, guard).send_for(YESTERDAY) is False
    assert "daily summary text for 2026-03-01 was not sent" in caplog.text
    assert claimed_days(guard) == {YESTERDAY}
    assert len(broken.photos) == 1  # the chart still went out
    healthy = RecordingMessenger()
    assert await summary(traces, healthy, guard).send_for(YESTERDAY) is False
    assert healthy.sent == []


async def test_a_failed_chart_does_not_undo_the_text(traces: Path) -> None:
    messenger = RecordingMessenger(fail_photo=TelegramNetworkError("timeout"))
    assert await summary(traces, messenger, InMemoryStore()).send_for(YESTERDAY) is True
    assert len(messenger.sent) == 1


async def test_compose_neither_claims_nor_sends(traces: Path) -> None:
    messenger, guard = RecordingMessenger(), InMemoryStore()
    message = await summary(traces, messenger, guard).compose(YESTERDAY)
    assert claimed_days(guard) == set()
    assert messenger.sent == []
    assert message.chart is not None
    assert message.chart.startswith(PNG_MAGIC)


async def test_a_day_without_calls_still_reports(tmp_path: Path) -> None:
    messenger = RecordingMessenger()
    assert await summary(tmp_path / "none", messenger, InMemoryStore()).send_yesterday() is True
    assert messenger.sent[0].text.endswith("No model calls.")
    assert not (tmp_path / "none").exists()


@pytest.mark.parametrize(
    ("locale", "expected"),
    [
        (
            "en",
            [
                "Usage for 2026-03-01",
                "p50 9.8k / p90 10.0k (1 estimated)",
                "History 40%",
                # 4,900 uncached + 0.25 x 4,900 cached, over the one call that reported
                "billable-equivalent input 6.1k/call",
                # estimate 10,000 vs 9,800 reported; the corrected estimate 9,900
                "Estimate error (deepseek/deepseek-chat): median 2.0%, p90 2.0%; "
                "corrected p90 1.0%",
            ],
        ),
        (
            "zh",
            [
                "2026-03-01 用量",
                "p50 9.8k / p90 10.0k（1 次为估算）",
                "历史段 40% · 固定段 20%",
                "每次计费等效输入 6.1k",
                "估算误差（deepseek/deepseek-chat）：中位 2.0%，p90 2.0%；校正后 p90 1.0%",
            ],
        ),
    ],
    ids=["en", "zh"],
)
def test_format_summary_text(locale: Locale, expected: list[str]) -> None:
    day = datetime(2026, 3, 1, 1, 0, tzinfo=UTC)
    report = build_report(
        [call(day, "a", est_corrected=9_900), call(day, "a", input_tokens=None)],
        zone=SHANGHAI,
        days=[YESTERDAY],
    )
    text = format_summary_text(report, YESTERDAY, locale)
    for fragment in expected:
        assert fragment in text
    assert len(text.splitlines()) == 7


@pytest.mark.parametrize(
    ("locale", "expected"),
    [
        ("en", "Cache writes 6.0k (30% of input), 60% of the cost"),
        ("zh", "缓存写入 6.0k（占输入 30%），占费用 60%"),
    ],
    ids=["en", "zh"],
)
def test_the_summary_shows_cache_writes_and_their_share_of_the_cost(
    locale: Locale, expected: str
) -> None:
    day = datetime(2026, 3, 1, 1, 0, tzinfo=UTC)
    written = {
        "input_tokens": 10_000,
        "cached_tokens": 4_000,
        "cache_write_tokens": 3_000,
        "cost": 0.25,
        "cache_write_cost": 0.15,
    }
    report = build_report(
        [call(day, "a", **written), call(day, "b", **written)], zone=SHANGHAI, days=[YESTERDAY]
    )
    text = format_summary_text(report, YESTERDAY, locale)
    assert expected in text
    assert "num_ctx" not in text


def test_the_summary_warns_of_silently_truncated_calls() -> None:
    day = datetime(2026, 3, 1, 1, 0, tzinfo=UTC)
    report = build_report(
        [call(day, "a", input_truncated_by_provider=True), call(day, "b")],
        zone=SHANGHAI,
        days=[YESTERDAY],
    )
    text = format_summary_text(report, YESTERDAY, "en")
    assert "1 calls reported far less input than was sent" in text
    assert "num_ctx" in text
    assert "Cache writes" not in text  # no call wrote the cache


@pytest.mark.parametrize(
    ("locale", "expected"),
    [
        ("en", ["Reasoning 1.2k of the 2.2k output tokens", "Stops: 1 refused, 1 cut at"]),
        ("zh", ["推理 1.2k（输出共 2.2k）", "停止原因：拒绝 1 次，因输出上限截断 1 次"]),
    ],
    ids=["en", "zh"],
)
def test_the_summary_shows_reasoning_tokens_and_stops(locale: Locale, expected: list[str]) -> None:
    day = datetime(2026, 3, 1, 1, 0, tzinfo=UTC)
    thought = {"output_tokens": 1_000, "reasoning_tokens": 600}
    report = build_report(
        [
            call(day, "a", stop="refusal", **thought),
            call(day, "b", stop="length", **thought),
            call(day, "c", stop="end"),
        ],
        zone=SHANGHAI,
        days=[YESTERDAY],
    )
    text = format_summary_text(report, YESTERDAY, locale)
    for line in expected:
        assert line in text

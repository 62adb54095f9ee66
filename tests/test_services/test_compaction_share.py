"""The usage report and the daily summary show what compaction costs (issue 17)."""

from __future__ import annotations

from datetime import UTC, date, datetime

from bot.agent.ledger import LedgerEntry
from bot.services.daily_summary import format_summary_text
from bot.services.usage_render import to_json
from bot.services.usage_report import build_report

DAY = date(2026, 11, 30)
AT = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def entry(
    turn: str, purpose: str, input_tokens: int, cached: int, cost: float | None
) -> LedgerEntry:
    return LedgerEntry(
        ts=AT,
        session=1,
        chat=-100,
        scene="group",
        turn_id=turn,
        purpose=purpose,  # type: ignore[arg-type]
        provider="default",
        model="m",
        input_tokens=input_tokens,
        cached_tokens=cached,
        output_tokens=10,
        cost=cost,
    )


def test_summary_calls_are_billed_but_belong_to_no_turn() -> None:
    entries = [
        entry("t1", "turn", 1000, 0, None),
        entry("t1", "compaction", 1000, 800, None),  # prepared after the reply of t1
        entry("t2", "turn", 1000, 800, None),
    ]
    row = build_report(entries, zone=UTC, days=[DAY]).row_for(DAY)
    assert row.calls == 3
    assert row.turns == 2
    assert row.calls_per_turn.one == 2  # the summary call is not a second call of t1
    assert row.calls_per_turn.mean == 1.0
    assert row.compaction_calls == 1
    # billable-equivalent input: 1000 + (200 + 200) + (200 + 200)
    assert row.compaction_share == 400 / 1800
    text = format_summary_text(build_report(entries, zone=UTC, days=[DAY]), DAY, "en")
    # no prices: the share is of the billable-equivalent input, and says so
    assert "Compaction: 1 summary calls, 22% of the billable-equivalent input" in text
    assert "of the cost" not in text


def test_with_prices_the_share_is_of_the_cost() -> None:
    entries = [entry("t1", "turn", 1000, 0, 0.03), entry("t1", "compaction", 900, 800, 0.01)]
    report = build_report(entries, zone=UTC, days=[DAY])
    assert report.total.compaction_share == 0.25
    text = format_summary_text(report, DAY, "en")
    assert "Compaction: 1 summary calls, 25% of the cost" in text
    assert '"compaction_calls": 1' in to_json(report)

"""👍/👎 feedback per day: reactions on the bot's messages in the usage report, its JSON and
table, the daily summary text, and `tgbot usage report` reading them from the database."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from bot.app.wiring import open_store
from bot.ports import StoredReaction
from bot.services.daily_summary import DailySummary
from bot.services.usage_render import render_table, to_json
from bot.services.usage_report import Feedback, build_report, with_feedback
from testkit.memory_store import InMemoryStore
from tests.fakes import RecordingMessenger, SteppingClock
from tests.rig import rig_settings
from tests.test_app.conftest import cli_env, tgbot_here

SHANGHAI = ZoneInfo("Asia/Shanghai")
DAY1 = date(2026, 3, 1)
DAY2 = date(2026, 3, 2)
CHAT = -100


def at_local(day: date, hour: int) -> datetime:
    return datetime(day.year, day.month, day.day, hour, tzinfo=SHANGHAI).astimezone(UTC)


MEMBERS = itertools.count(1)  # each reaction from another member: one member's repeats count once


def reaction(emoji: str, at: datetime, *, chat: int = CHAT) -> StoredReaction:
    return StoredReaction(
        chat_id=chat,
        message_id=5,
        user_id=next(MEMBERS),
        user_name="Alice",
        emoji=emoji,
        created_at=at,
    )


REACTIONS = [
    reaction("👍", at_local(DAY1, 9)),
    reaction("👍", at_local(DAY1, 23)),
    reaction("👎", at_local(DAY1, 12)),
    reaction("🔥", at_local(DAY1, 12)),
    # 00:30 on day 2 in Shanghai is still day 1 in UTC: it counts on day 2
    reaction("👎", at_local(DAY2, 0) + timedelta(minutes=30)),
    reaction("👍", at_local(DAY2, 10), chat=-200),
    reaction("👍", at_local(DAY2 + timedelta(days=1), 10)),  # outside the report
]


def files(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under `root` with its size and modification time."""
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if p.is_file()
    }


def triples(reactions: list[StoredReaction]) -> list[tuple[datetime, int, str]]:
    return [(r.created_at, r.chat_id, r.emoji) for r in reactions]


def test_feedback_is_counted_per_day_in_the_zone() -> None:
    report = build_report([], zone=SHANGHAI, days=[DAY1, DAY2])
    counted = with_feedback(report, triples(REACTIONS), zone=SHANGHAI)
    assert counted.row_for(DAY1).feedback == Feedback(up=2, down=1, other=1)
    assert counted.row_for(DAY2).feedback == Feedback(up=1, down=1, other=0)
    assert counted.total.feedback == Feedback(up=3, down=2, other=1)

    one_chat = with_feedback(
        build_report([], zone=SHANGHAI, days=[DAY1, DAY2], chat=-200),
        triples(REACTIONS),
        zone=SHANGHAI,
    )
    assert one_chat.total.feedback == Feedback(up=1)


def test_feedback_in_json_and_table() -> None:
    report = with_feedback(
        build_report([], zone=SHANGHAI, days=[DAY1, DAY2]), triples(REACTIONS), zone=SHANGHAI
    )
    data = json.loads(to_json(report))
    assert data["days"][0]["feedback"] == {"up": 2, "down": 1, "other": 1}
    assert data["total"]["feedback"] == {"up": 3, "down": 2, "other": 1}
    table = render_table(report)
    assert "Feedback reactions" in table
    rows = [line.split() for line in table.splitlines() if line.strip().startswith("2026-03-01")]
    assert rows[-1] == ["2026-03-01", "2", "1", "1"]  # the feedback table is the last one
    quiet = render_table(build_report([], zone=SHANGHAI, days=[DAY1]))
    assert "Feedback reactions" not in quiet


async def test_the_daily_summary_names_the_days_feedback(tmp_path: Path) -> None:
    store = InMemoryStore()
    await store.record_reactions(REACTIONS)
    summary = DailySummary(
        tmp_path / "agent-traces",
        SHANGHAI,
        4242,
        RecordingMessenger(),
        store,
        SteppingClock(at_local(DAY2, 8)),
        locale="en",
        reactions=store,
    )
    message = await summary.compose(DAY1)
    assert "Feedback reactions: 👍 2 · 👎 1 · other 1" in message.text
    zh = DailySummary(
        tmp_path / "agent-traces",
        SHANGHAI,
        4242,
        RecordingMessenger(),
        store,
        SteppingClock(at_local(DAY2, 8)),
        locale="zh",
        reactions=store,
    )
    assert "👍 2 · 👎 1" in (await zh.compose(DAY1)).text
    nothing = await summary.compose(DAY1 - timedelta(days=3))
    assert "Feedback" not in nothing.text


async def test_tgbot_usage_report_reads_feedback_from_the_database(tmp_path: Path) -> None:
    today = datetime.now(UTC).date()
    store = await open_store(rig_settings(tmp_path))
    noon = datetime(today.year, today.month, today.day, 12, tzinfo=UTC)
    await store.record_reactions(
        [
            reaction("👍", noon),
            reaction("👍", noon),
            reaction("👎", noon),
            reaction("👎", noon - timedelta(days=1)),
        ]
    )
    await store.close()
    before = files(tmp_path)

    done = await tgbot_here("usage", "report", "--json", "--days", "2", env=cli_env(tmp_path))
    assert done.code == 0, done.err
    days = {d["day"]: d["feedback"] for d in json.loads(done.out)["days"]}
    assert days[today.isoformat()] == {"up": 2, "down": 1, "other": 0}
    assert days[(today - timedelta(days=1)).isoformat()] == {"up": 0, "down": 1, "other": 0}
    assert files(tmp_path) == before  # read-only: nothing created or touched


async def test_tgbot_usage_report_without_a_database_creates_none(tmp_path: Path) -> None:
    done = await tgbot_here("usage", "report", "--json", "--days", "1", env=cli_env(tmp_path))
    assert done.code == 0, done.err
    assert json.loads(done.out)["total"]["feedback"] == {"up": 0, "down": 0, "other": 0}
    assert files(tmp_path) == {}

"""The round-trips row of `python -m bench`: statements, transactions and hand-offs per
answered message of the real bot, and the one statement a turn's history costs."""

from __future__ import annotations

from sqlalchemy.dialects import sqlite

from bench import bench_trips
from storage.queries import SESSION_BY_ID


def test_each_answered_message_costs_counted_trips_and_one_history_statement() -> None:
    result = bench_trips.run(chats=3, per_chat=3)
    assert result.answered == 9
    statements = sum(result.statements.values())
    # a reply's write transaction (its statements and COMMIT) is one hand-off to its
    # connection's thread (`storage.sqlite_fast`), the window read one more: fewer
    # hand-offs than statements; reads run alone, with no transaction to end
    assert 0 < result.trips < statements
    assert 0 < result.transactions < statements
    # the session row and the window's records come in one statement per turn
    history = [text for text in result.statements if text.startswith("WITH RECURSIVE state")]
    assert len(history) == 1
    assert result.statements[history[0]] == result.answered
    by_id = " ".join(str(SESSION_BY_ID.compile(dialect=sqlite.dialect())).split())
    assert by_id not in result.statements  # no separate read of the session row
    assert "| SQLite | 3 × 3 | 9 |" in result.markdown()

"""The dashboard benchmark runs end to end on tiny sizes (its table is what REPORT.md shows)."""

from __future__ import annotations

import re

from bench.bench_dashboard import run


def test_the_dashboard_bench_times_every_page() -> None:
    table = run(records=400, lines=600, repeats=1)
    for page in ("/ (14 days)", "/ (30 days)", "/chats", "/chats/-1001", "/metrics", "/healthz"):
        assert re.search(
            rf"^\| {re.escape(page)} \| \d+ ms \| \d+ ms \| (PASS|FAIL) \|$", table, re.M
        )
    assert "today's file growing" in table

"""Benchmark: the cost of preparing the next call against stored history (1k/10k/100k).

A session of N records in SQLite (bulk-built as in `bench_storage`); timed is
`TurnRunner.prepare`: load the window's records, select the window, project (headers,
aliases, quotes, old tool results), estimate and trim, i.e. everything before the provider
call. The median of repeats after three warm-up calls (which may move the window once).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from adapters.llm.scripted import ScriptedModel
from bench.bench_storage import CHAT, build_session
from bench.fakes import CountingMessenger
from bot.app.wiring import build_app
from bot.config import load_settings
from bot.domain.ids import SessionKey
from storage.engine import create_engine_for
from storage.migrate import upgrade_database
from storage.sql import SqlStore

SIZES = (1_000, 10_000, 100_000)


async def _measure(size: int, workdir: Path, repeats: int) -> tuple[float, int]:
    url = f"sqlite+aiosqlite:///{workdir / f'projection-{size}.sqlite3'}"
    await upgrade_database(url)
    store = SqlStore(create_engine_for(url))
    try:
        await build_session(store, url, size)
        settings = load_settings(data_dir=workdir, bot_locale="en")
        app = build_app(
            settings,
            store=store,
            messenger=CountingMessenger(),
            bot_id=999,
            bot_name="Helper",
            offline=ScriptedModel(),
        )
        session = await store.find_session(SessionKey(chat_id=CHAT))
        assert session is not None
        for _ in range(3):  # warm-up: the first call may move the window; caches fill
            state = await app.runner.prepare(session, turn_id="warm-up")
        times = []
        for n in range(repeats):
            session = await store.find_session(SessionKey(chat_id=CHAT))
            assert session is not None
            started = time.perf_counter()
            state = await app.runner.prepare(session, turn_id=f"t{n}")
            times.append(time.perf_counter() - started)
        await app.routes.aclose()
    finally:
        await store.close()
    return statistics.median(times), len(state.messages)


async def _run(sizes: Sequence[int], repeats: int) -> tuple[str, dict[int, float], dict[int, int]]:
    found: dict[int, float] = {}
    sent: dict[int, int] = {}
    lines = [
        "| stored records | prepare (median) | messages sent |",
        "|---:|---:|---:|",
    ]
    with tempfile.TemporaryDirectory(prefix="tgbot-bench-projection-") as tmp:
        for size in sizes:
            median, messages = await _measure(size, Path(tmp), repeats)
            found[size] = median
            sent[size] = messages
            lines.append(f"| {size:,} | {median * 1000:.2f} ms | {messages} |")
    if len(sizes) > 1:
        ratio = found[max(sizes)] / found[min(sizes)]
        lines += ["", f"{max(sizes):,} / {min(sizes):,}: {ratio:.2f}x"]
    return "\n".join(lines), found, sent


def run(
    sizes: Sequence[int] = SIZES, repeats: int = 15
) -> tuple[str, dict[int, float], dict[int, int]]:
    """The markdown table, the median seconds and the messages sent, per size."""
    return asyncio.run(_run(sizes, repeats))


if __name__ == "__main__":
    print(run()[0])

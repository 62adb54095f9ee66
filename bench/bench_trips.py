"""Database round trips per answered message: statements, transactions and thread hand-offs.

Run: `.venv/bin/python -m bench.bench_trips [--chats 100] [--messages 10] [--statements]
[--postgres-url URL]`.

The bot runs in this process (as in `bench/bench_load.py`: the real store, aiogram's client
polling the fake Bot API over HTTP, the scripted model), under the load of
`bench/bench_cpu.py`: `chats` private chats at once, each sending its next message only once
the previous one is answered, so every inbound message is answered by exactly one reply and
"per answered message" is also "per inbound message". Counted from the first message to the
last reply, on the store's engine (every SQL component of the bot shares it):

- statements: SQL statements the bot sends, transaction control (`BEGIN`, `COMMIT`,
  `ROLLBACK`) not counted; an `executemany` counts once; on SQLite both those SQLAlchemy
  runs and those `storage.sqlite.jobs.FastSqlite` runs without it;
- transactions: on SQLite, as SQLite runs them (its trace callback): each `BEGIN` that
  reaches it, and each statement run outside a transaction (its own transaction); on
  PostgreSQL, as the server counts them (`pg_stat_database`: commits and rollbacks, an
  autocommit statement one each, read once the bot's connections are closed);
- trips: on SQLite, hand-offs: jobs handed to a connection's thread and answered back on
  the event loop (`storage.sqlite.driver.Connection.trips`); statements run on the loop
  itself, so a hand-off means a job waited there for another process's lock; on
  PostgreSQL, round trips to the server: the statements, and the `BEGIN`
  before the first statement of a transaction and its `COMMIT` or `ROLLBACK` (an autocommit
  read has neither; a `BEGIN` sent with the transaction's first statement is no trip of its
  own), through SQLAlchemy or as `storage.postgres.jobs` runs them.

`--statements` lists the statements by count per answered message (the first 100 characters
of each), which is where to look for the next trip to save.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sqlite3
import tempfile
import threading
import time
import weakref
from collections import Counter
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine

from adapters.llm.scripted import ScriptedModel
from adapters.telegram.app import build_dispatcher
from adapters.telegram.bot_session import build_bot
from adapters.telegram.polling_loop import poll_updates
from adapters.telegram.sender import TelegramMessenger
from bench.bench_ingest import reset_postgres
from bot.app.wiring import build_app, open_store
from bot.config import load_settings
from storage.engine import create_engine_for
from storage.postgres import jobs as postgres_jobs
from storage.sql import SqlStore
from storage.sqlite import driver as sqlite_driver
from storage.sqlite import jobs as sqlite_jobs
from testkit.fake_bot_api import FakeBotApi

_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")
_LITERALS = re.compile(r"\b\d+\b")
"""The values written into a statement's SQL (`storage.postgres.parts`' locks): counted as one."""


@dataclass(slots=True)
class TripCounter:
    """Counts what one engine sends while `counting` is set."""

    counting: bool = False
    statements: Counter[str] = field(default_factory=Counter)
    ends: int = 0
    """PostgreSQL: `BEGIN`s sent before a transaction's first statement, and the `COMMIT`s
    or `ROLLBACK`s that ended them."""
    sqlite_transactions: int = 0
    """`BEGIN`s and lone statements as SQLite ran them (its trace callback)."""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _trips_at_start: dict[int, int] = field(default_factory=dict)
    _drivers: weakref.WeakValueDictionary[int, sqlite_driver.Connection] = field(
        default_factory=weakref.WeakValueDictionary
    )

    @property
    def hand_offs(self) -> int:
        return sum(
            driver.trips - self._trips_at_start.get(key, driver.trips)
            for key, driver in list(self._drivers.items())
        )

    def attach(self, engine: AsyncEngine) -> None:
        sync = engine.sync_engine
        event.listen(sync, "before_cursor_execute", self._on_statement)
        event.listen(sync, "commit", self._on_end)
        event.listen(sync, "rollback", self._on_end)
        if engine.dialect.name == "sqlite":
            event.listen(sync, "checkout", self._on_checkout)
            sqlite_jobs.STATEMENT_LISTENERS.append(self._on_fast_statement)
        else:
            postgres_jobs.STATEMENT_LISTENERS.append(self._on_postgres_job)

    def _on_fast_statement(self, statement: str) -> None:
        """A statement `storage.sqlite.jobs.FastSqlite` ran."""
        if self.counting:
            with self._lock:
                self.statements[" ".join(statement.split())] += 1

    def _on_postgres_job(self, statement: str) -> None:
        """A statement, `BEGIN`, `COMMIT` or `ROLLBACK` `storage.postgres.jobs` sent."""
        if not self.counting:
            return
        text = " ".join(statement.split())
        with self._lock:
            if text.upper().startswith("BEGIN; "):  # sent with its BEGIN: one round trip
                self.statements[_LITERALS.sub("N", text[len("BEGIN; ") :])] += 1
            elif text.upper().startswith(_CONTROL):
                self.ends += 1
            else:
                self.statements[text] += 1

    def detach(self) -> None:
        with suppress(ValueError):
            sqlite_jobs.STATEMENT_LISTENERS.remove(self._on_fast_statement)
        with suppress(ValueError):
            postgres_jobs.STATEMENT_LISTENERS.remove(self._on_postgres_job)

    def _on_statement(self, conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        text = " ".join(statement.split())
        if not self.counting or text.upper().startswith(_CONTROL):
            return
        self.statements[text] += 1
        autocommit = conn.get_execution_options().get("isolation_level") == "AUTOCOMMIT"
        if not autocommit and not conn.info.get("tgbot_bench_begun"):
            conn.info["tgbot_bench_begun"] = True
            self.ends += 1  # its BEGIN

    def _on_end(self, conn: Any) -> None:
        if conn.info.pop("tgbot_bench_begun", False) and self.counting:
            self.ends += 1  # its COMMIT or ROLLBACK

    def _on_checkout(self, dbapi_connection: Any, *_rest: Any) -> None:
        driver = dbapi_connection._connection
        if not isinstance(driver, sqlite_driver.Connection) or id(driver) in self._drivers:
            return
        self._drivers[id(driver)] = driver

        def trace_on(here: Any) -> None:
            conn: sqlite3.Connection = here.open()

            def trace(sql: str) -> None:
                if not self.counting or sql.startswith("--"):  # a trigger's sub-statement
                    return
                head = sql.lstrip().upper()
                if head.startswith("BEGIN") or (
                    not conn.in_transaction and not head.startswith(_CONTROL)
                ):
                    with self._lock:
                        self.sqlite_transactions += 1

            conn.set_trace_callback(trace)

        driver._run(trace_on)  # queued before the statement this checkout is for
        self._trips_at_start[id(driver)] = driver.trips

    def start(self) -> None:
        for key, driver in list(self._drivers.items()):
            self._trips_at_start[key] = driver.trips
        self.counting = True


@dataclass(frozen=True, slots=True)
class TripsResult:
    database: str
    chats: int
    per_chat: int
    answered: int
    seconds: float
    statements: Counter[str]
    transactions: int
    trips: int
    """SQLite: hand-offs to a connection's thread; PostgreSQL: round trips to the server."""

    def per_message(self, count: int) -> float:
        return count / max(1, self.answered)

    def markdown(self) -> str:
        return (
            f"| {self.database} | {self.chats} × {self.per_chat} | {self.answered:,} "
            f"| {self.per_message(sum(self.statements.values())):.2f} "
            f"| {self.per_message(self.transactions):.2f} | {self.per_message(self.trips):.2f} |"
        )

    def statement_lines(self, top: int = 40, width: int = 100) -> list[str]:
        counted = self.statements.most_common(top)
        return [f"{self.per_message(n):6.2f}  {text[:width]}" for text, n in counted]


TRIPS_HEADER = (
    "| database | chats × messages | answered | statements / answered message "
    "| transactions / answered message | hand-offs (SQLite) or round trips (PostgreSQL) "
    "/ answered message |\n"
    "|---|---|---:|---:|---:|---:|"
)


async def run_trips(
    chats: int, per_chat: int, data_dir: Path, *, database_url: str | None = None
) -> TripsResult:
    async with FakeBotApi(username="trips_bot") as api:
        if database_url is not None:
            await reset_postgres(database_url)
        settings = load_settings(
            data_dir=data_dir,
            database_url=database_url,
            bot_locale="en",
            triggers={"merge_window_seconds": 0},
            security={"user_messages_per_minute": 0, "chat_messages_per_minute": 0},
            telegram={"per_chat_per_second": 0, "per_bot_per_second": 0},
            schedule={"daily_summary": False},
        )
        store = await open_store(settings)
        assert isinstance(store, SqlStore)
        counter = TripCounter()
        counter.attach(store.engine)
        bot = build_bot(api.token, api.base_url)
        app = build_app(
            settings,
            store=store,
            messenger=TelegramMessenger(bot),
            bot_id=api.bot_id,
            bot_name="Trips",
            offline=ScriptedModel(keep_requests=False),
        )
        dispatcher = build_dispatcher(
            app.inbound, bot_id=api.bot_id, bot_username=api.username, locale="en"
        )
        stop = asyncio.Event()
        polling = asyncio.create_task(poll_updates(dispatcher, bot, stop=stop, poll_seconds=1))
        await api.wait_for_call("getUpdates", 1, timeout=60)

        async def conversation(chat: int) -> int:
            for n in range(per_chat):
                api.push_update(api.user_message(chat, chat, f"message {n}", chat_type="private"))
                await api.wait_for_sent(chat, n + 1, timeout=120)
            return per_chat

        server_before = await _server_transactions(database_url)
        counter.start()
        started = time.perf_counter()
        answered = sum(await asyncio.gather(*(conversation(10_000 + c) for c in range(chats))))
        await app.inbound.drain()
        seconds = time.perf_counter() - started
        counter.counting = False
        counter.detach()
        stop.set()
        await polling
        await bot.session.close()
        await app.routes.aclose()
        sqlite = store.engine.dialect.name == "sqlite"
        hand_offs = counter.hand_offs  # before the connections close
        await store.close()  # PostgreSQL: each backend reports its counts as it ends
        server = await _server_transactions(database_url) - server_before
        result = TripsResult(
            database="SQLite" if sqlite else "PostgreSQL",
            chats=chats,
            per_chat=per_chat,
            answered=answered,
            seconds=seconds,
            statements=counter.statements,
            transactions=counter.sqlite_transactions if sqlite else server,
            trips=hand_offs if sqlite else sum(counter.statements.values()) + counter.ends,
        )
    return result


async def _server_transactions(database_url: str | None) -> int:
    """PostgreSQL's count of transactions ended in this database (0 without one)."""
    if database_url is None:
        return 0
    engine = create_engine_for(database_url)
    try:
        async with engine.connect() as conn:
            await conn.execute(text("SELECT pg_stat_clear_snapshot()"))
            row = await conn.execute(
                text(
                    "SELECT xact_commit + xact_rollback FROM pg_stat_database "
                    "WHERE datname = current_database()"
                )
            )
            return int(row.scalar_one())
    finally:
        await engine.dispose()


def run(chats: int = 100, per_chat: int = 10, *, database_url: str | None = None) -> TripsResult:
    with tempfile.TemporaryDirectory(prefix="tgbot-bench-trips-") as tmp:
        return asyncio.run(run_trips(chats, per_chat, Path(tmp), database_url=database_url))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--chats", type=int, default=100)
    parser.add_argument("--messages", type=int, default=10, help="messages per chat")
    parser.add_argument("--statements", action="store_true", help="list statements by count")
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("TEST_POSTGRES_URL"),
        help="also run on this PostgreSQL database (its public schema is dropped!)",
    )
    args = parser.parse_args()
    results = [run(args.chats, args.messages)]
    if args.postgres_url:
        results.append(run(args.chats, args.messages, database_url=args.postgres_url))
    print(TRIPS_HEADER)
    for result in results:
        print(result.markdown())
    if args.statements:
        for result in results:
            print(f"\n{result.database}: statements per answered message")
            print("\n".join(result.statement_lines()))


if __name__ == "__main__":
    main()

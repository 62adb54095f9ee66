"""Load: many private chats at once through aiogram's real client and the fake Bot API.

Run: `.venv/bin/python -m bench.bench_load [--chats 200] [--messages 50] [--postgres-url URL]`
(SQLite in a temp directory, or a throw-away PostgreSQL database whose `public` schema is
dropped and rebuilt; the scripted model, every message answered). All messages are queued on
the fake Bot API first; the bot polls them with `poll_updates` (batches of 100, chats concurrently),
stores each, runs a turn, and sends the reply over HTTP. Measured until every message is
stored and every turn has ended:

- messages/s: inbound messages taken in and answered per second of wall time;
- peak memory: the process's peak RSS (the fake Bot API lives in the same process) and the
  Python heap peak seen by tracemalloc when `--trace-memory` is given (slower);
- checks: every message stored exactly once, each chat's messages in order.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import resource
import tempfile
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

from adapters.llm.scripted import ScriptedModel
from adapters.telegram.app import build_bot, build_dispatcher
from adapters.telegram.fake_api import FakeBotApi
from adapters.telegram.polling_loop import poll_updates
from adapters.telegram.sender import TelegramMessenger
from bench.bench_ingest import reset_postgres
from bot.app.heap import settle_heap
from bot.app.wiring import build_app, open_store
from bot.config import load_settings
from bot.domain.ids import SessionKey
from bot.domain.records import UserRecord


@dataclass(frozen=True, slots=True)
class LoadResult:
    chats: int
    per_chat: int
    seconds: float
    stored_in_order: bool
    replies: int
    peak_rss_mb: float
    heap_peak_mb: float | None

    @property
    def messages(self) -> int:
        return self.chats * self.per_chat

    @property
    def per_second(self) -> float:
        return self.messages / self.seconds

    def markdown(self, label: str = "SQLite") -> str:
        return (
            f"| {label} | {self.chats} × {self.per_chat} = {self.messages:,} "
            f"| {self.replies:,} | {self.seconds:.1f} s | {self.per_second:,.0f} "
            f"| {self.stored_in_order} | {self.peak_rss_mb:.0f} MB |"
        )


LOAD_HEADER = (
    "| database | chats × messages | replies | wall time | answered msgs/s "
    "| stored once, in order | peak RSS |\n|---|---|---:|---:|---:|---|---:|"
)


def run(chats: int = 200, per_chat: int = 50, *, database_url: str | None = None) -> LoadResult:
    with tempfile.TemporaryDirectory(prefix="tgbot-bench-load-") as tmp:
        return asyncio.run(run_load(chats, per_chat, Path(tmp), database_url=database_url))


async def run_load(
    chats: int,
    per_chat: int,
    data_dir: Path,
    *,
    trace_memory: bool = False,
    database_url: str | None = None,
) -> LoadResult:
    if trace_memory:
        tracemalloc.start()
    async with FakeBotApi(username="load_bot") as api:
        if database_url is not None:
            await reset_postgres(database_url)
        settings = load_settings(
            data_dir=data_dir,
            database_url=database_url,
            bot_locale="en",
            triggers={"merge_window_seconds": 0},
            security={"user_messages_per_minute": 0, "chat_messages_per_minute": 0},
            schedule={"daily_summary": False},
        )
        store = await open_store(settings)
        bot = build_bot(api.token, api.base_url)
        app = build_app(
            settings,
            store=store,
            messenger=TelegramMessenger(bot),
            bot_id=api.bot_id,
            bot_name="Load",
            offline=ScriptedModel(keep_requests=False),
        )
        dispatcher = build_dispatcher(
            app.inbound, bot_id=api.bot_id, bot_username=api.username, locale="en"
        )
        chat_ids = [10_000 + n for n in range(chats)]
        last = 0
        for n in range(per_chat):
            for chat in chat_ids:
                update = api.user_message(chat, chat, f"message {n}", chat_type="private")
                last = api.push_update(update)
        thresholds = gc.get_threshold()
        settle_heap()  # as `tgbot run` does before its first update
        stop = asyncio.Event()
        started = time.perf_counter()
        polling = asyncio.create_task(poll_updates(dispatcher, bot, stop=stop, poll_seconds=1))
        while not any(int(c.get("offset") or 0) > last for c in api.calls_of("getUpdates")):
            await api.wait_for_call("getUpdates", len(api.calls_of("getUpdates")) + 1, 60)
        await app.inbound.drain()
        seconds = time.perf_counter() - started
        stop.set()
        await polling
        gc.unfreeze()  # the next bench in this process starts from the defaults
        gc.set_threshold(*thresholds)
        ordered = True
        for chat in chat_ids:
            session = await store.find_session(SessionKey(chat_id=chat))
            assert session is not None
            loaded = await store.load_history(session.id, max_records=per_chat * 4 + 10)
            texts = [r.body.text for r in loaded.records if isinstance(r.body, UserRecord)]
            ordered = ordered and not loaded.has_earlier
            ordered = ordered and texts == [f"message {n}" for n in range(per_chat)]
        replies = sum(len(api.sent_messages(chat)) for chat in chat_ids)
        await bot.session.close()
        await app.routes.aclose()
        await store.close()
    heap = None
    if trace_memory:
        heap = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return LoadResult(chats, per_chat, seconds, ordered, replies, rss, heap)


def main() -> None:
    parser = argparse.ArgumentParser(description="many chats at once through the fake Bot API")
    parser.add_argument("--chats", type=int, default=200)
    parser.add_argument("--messages", type=int, default=50, help="messages per chat")
    parser.add_argument("--trace-memory", action="store_true")
    parser.add_argument("--postgres-url", help="a throw-away PostgreSQL database")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(
            run_load(
                args.chats,
                args.messages,
                Path(tmp),
                trace_memory=args.trace_memory,
                database_url=args.postgres_url,
            )
        )
    print(f"{result.chats} chats x {result.per_chat} messages = {result.messages} messages")
    print(f"  {result.seconds:.1f} s, {result.per_second:.0f} messages/s, {result.replies} replies")
    print(f"  every message stored once, in order per chat: {result.stored_in_order}")
    heap = f", Python heap peak {result.heap_peak_mb:.0f} MB" if result.heap_peak_mb else ""
    print(f"  peak RSS {result.peak_rss_mb:.0f} MB{heap}")


if __name__ == "__main__":
    main()

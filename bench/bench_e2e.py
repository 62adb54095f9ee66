"""Benchmark: inbound messages per second end to end, through aiogram's real HTTP client.

`FakeBotApi` on 127.0.0.1 queues every update of many group chats at once; the bot long-polls
it with `tgbot run`'s polling loop (`poll_updates`), parses, stores every message in SQLite
(a file, WAL), answers the ones that mention it (a scripted model, so the model costs
nothing) and sends the answers back over HTTP. Timed: from the first push until every
message is stored and every answer was sent.
"""

from __future__ import annotations

import asyncio
import resource
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from adapters.llm.scripted import ScriptedModel
from adapters.telegram.app import build_dispatcher
from adapters.telegram.bot_session import build_bot
from adapters.telegram.polling_loop import poll_updates
from adapters.telegram.sender import TelegramMessenger
from bot.app.demo import CountingSink
from bot.app.wiring import build_app
from bot.config import load_settings
from bot.domain.ids import SessionKey
from storage.engine import create_engine_for
from storage.migrate import upgrade_database
from storage.sql import SqlStore
from testkit.fake_bot_api import FakeBotApi

TOKEN = "424242:BENCH-token"


@dataclass(frozen=True, slots=True, kw_only=True)
class E2EResult:
    chats: int
    per_chat: int
    addressed: int
    answered: int
    seconds: float
    peak_rss_mb: float

    @property
    def messages(self) -> int:
        return self.chats * self.per_chat

    @property
    def per_second(self) -> float:
        return self.messages / self.seconds

    def markdown(self) -> str:
        return "\n".join(
            [
                "| chats × messages | mentions / answers sent | wall time | inbound msgs/s "
                "| peak RSS |",
                "|---|---:|---:|---:|---:|",
                f"| {self.chats} × {self.per_chat} = {self.messages:,} "
                f"| {self.addressed} / {self.answered} "
                f"| {self.seconds:.2f} s | {self.per_second:,.0f} | {self.peak_rss_mb:.0f} MB |",
            ]
        )


async def _run(chats: int, per_chat: int, every: int) -> E2EResult:
    with tempfile.TemporaryDirectory(prefix="tgbot-bench-e2e-") as tmp:
        settings = load_settings(
            data_dir=Path(tmp),
            bot_locale="en",
            triggers={"merge_window_seconds": 0},
            security={"user_messages_per_minute": 0, "chat_messages_per_minute": 0},
        )
        async with FakeBotApi(TOKEN, username="bench_helper_bot", first_name="Helper") as api:
            url = settings.resolved_database_url
            await upgrade_database(url)
            store = SqlStore(create_engine_for(url))
            bot = build_bot(TOKEN, api.base_url)
            try:
                me = await bot.get_me()
                app = build_app(
                    settings,
                    store=store,
                    messenger=TelegramMessenger(bot),
                    bot_id=me.id,
                    bot_name=me.first_name,
                    offline=ScriptedModel(),
                )
                sink = CountingSink(app.inbound)
                dispatcher = build_dispatcher(
                    sink, bot_id=me.id, bot_username=me.username, locale="en"
                )
                addressed = 0
                updates = []
                for n in range(per_chat):
                    for c in range(chats):
                        mention = n % every == every - 1
                        addressed += mention
                        text = f"message {n} in chat {c}" + (f" @{me.username}" if mention else "")
                        user = {"id": 2_000 + (n + c) % 7, "first_name": f"member{(n + c) % 7}"}
                        updates.append(api.user_message(-1_000_000 - c, user, text))
                started = time.perf_counter()
                for update in updates:
                    api.push_update(update)
                stop = asyncio.Event()
                polling = asyncio.create_task(
                    poll_updates(dispatcher, bot, stop=stop, poll_seconds=1)
                )
                await sink.wait_for(len(updates))
                await app.inbound.drain()
                seconds = time.perf_counter() - started
                # a mention that arrives while the chat's previous turn waits is merged
                # into it (one answer per burst), so answers can be fewer than mentions
                answered = len(api.calls_of("sendMessage"))
                assert 0 < answered <= addressed, f"{answered} answers for {addressed}"
                stop.set()
                await polling
                stored = 0
                for c in range(chats):
                    session = await store.find_session(SessionKey(chat_id=-1_000_000 - c))
                    assert session is not None
                    path = await store.load_path(session.id)
                    stored += sum(1 for r in path if r.body.kind == "user")
                assert stored == len(updates), f"stored {stored} of {len(updates)}"
                await app.routes.aclose()
            finally:
                await bot.session.close()
                await store.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return E2EResult(
        chats=chats,
        per_chat=per_chat,
        addressed=addressed,
        answered=answered,
        seconds=seconds,
        peak_rss_mb=peak,
    )


def run(chats: int = 50, per_chat: int = 20, every: int = 5) -> E2EResult:
    return asyncio.run(_run(chats, per_chat, every))


if __name__ == "__main__":
    print(run().markdown())

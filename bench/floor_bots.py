"""The two bots `bench/bench_cpu.py` sets beside `tgbot run`: plain aiogram, nothing of ours.

Run: `python -m bench.floor_bots echo|naive` with BOT_TOKEN and TELEGRAM_API_BASE in the
environment (and, for `naive`, LLM_BASE_URL and DATABASE_PATH).

- `echo`: answers every private message with its own text (`message.answer`): the floor of
  what aiogram's polling, parsing and one `sendMessage` cost.
- `naive`: the plain LLM bot a careful engineer writes in an afternoon, the fair baseline:
  one sqlite3 connection in WAL with `synchronous=NORMAL` (the settings any SQLite service
  runs with; its blocking calls stay on the event loop), a commit per message, the chat's
  last 20 messages read back and posted with a system prompt to an OpenAI-compatible
  `/chat/completions` through one pooled httpx client sized like ours (100 connections, idle
  ones kept, a 60 s timeout so a busy moment never drops a message), the reply stored and
  sent with one `sendMessage`. No windows, no ledger, no traces, no retries.
  With MERGE_WINDOW_SECONDS set, the same bot waits that long after a chat's message and
  answers only the last of a burst (the rule `tgbot run`'s merge window keeps): the
  reference for what waiting alone costs any bot.

Imports nothing from this project, so what it costs is aiogram's, sqlite3's and httpx's.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import sys
from typing import Any

import httpx
from aiogram import Bot, Dispatcher
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from aiogram.types import Message

SYSTEM = "You are a helpful assistant in a Telegram chat."
HISTORY = 20
MODEL_CONNECTIONS = 100
"""The pool's size, as `tgbot run`'s model client (adapters/llm/openai_provider.py)."""
MODEL_TIMEOUT_SECONDS = 60.0


def _bot() -> Bot:
    base = os.environ["TELEGRAM_API_BASE"].rstrip("/")
    session = AiohttpSession(api=TelegramAPIServer.from_base(base))
    return Bot(os.environ["BOT_TOKEN"], session=session)


def echo_dispatcher() -> Dispatcher:
    dispatcher = Dispatcher()

    @dispatcher.message()
    async def echo(message: Message) -> None:
        await message.answer(message.text or "…")

    return dispatcher


def open_database(path: str) -> sqlite3.Connection:
    """The naive bot's one connection: WAL and `synchronous=NORMAL`, as a careful engineer
    configures SQLite for a service (the default rollback journal syncs twice per commit)."""
    database = sqlite3.connect(path)
    database.execute("PRAGMA journal_mode=WAL")
    database.execute("PRAGMA synchronous=NORMAL")
    return database


def model_client(base_url: str) -> httpx.AsyncClient:
    """One pooled client for every model call, its pool sized like ours."""
    return httpx.AsyncClient(
        base_url=base_url,
        headers={"Authorization": "Bearer sk-naive"},
        limits=httpx.Limits(
            max_connections=MODEL_CONNECTIONS, max_keepalive_connections=MODEL_CONNECTIONS
        ),
        timeout=httpx.Timeout(MODEL_TIMEOUT_SECONDS),
    )


def naive_dispatcher(
    database: sqlite3.Connection, llm: httpx.AsyncClient, merge_window: float = 0.0
) -> Dispatcher:
    database.execute(
        "CREATE TABLE IF NOT EXISTS messages (id INTEGER PRIMARY KEY, chat_id INTEGER, "
        "role TEXT, content TEXT)"
    )
    database.execute("CREATE INDEX IF NOT EXISTS by_chat ON messages (chat_id, id)")
    database.commit()
    dispatcher = Dispatcher()
    latest: dict[int, int] = {}

    def store(chat_id: int, role: str, content: str) -> None:
        database.execute(
            "INSERT INTO messages (chat_id, role, content) VALUES (?, ?, ?)",
            (chat_id, role, content),
        )
        database.commit()

    @dispatcher.message()
    async def answer(message: Message) -> None:
        chat_id = message.chat.id
        store(chat_id, "user", message.text or "")
        if merge_window:
            latest[chat_id] = message.message_id
            await asyncio.sleep(merge_window)
            if latest[chat_id] != message.message_id:
                return  # a later message of the burst answers it
        rows = database.execute(
            "SELECT role, content FROM messages WHERE chat_id = ? ORDER BY id DESC LIMIT ?",
            (chat_id, HISTORY),
        ).fetchall()
        messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
        messages += [{"role": role, "content": content} for role, content in reversed(rows)]
        response = await llm.post(
            "/chat/completions", json={"model": "naive", "messages": messages}
        )
        response.raise_for_status()
        reply = response.json()["choices"][0]["message"]["content"] or "…"
        store(chat_id, "assistant", reply)
        await message.answer(reply)

    return dispatcher


async def main(kind: str) -> None:
    bot = _bot()
    if kind == "echo":
        await echo_dispatcher().start_polling(bot, handle_signals=True)
        return
    database = open_database(os.environ["DATABASE_PATH"])
    async with model_client(os.environ["LLM_BASE_URL"]) as llm:
        window = float(os.environ.get("MERGE_WINDOW_SECONDS", "0"))
        await naive_dispatcher(database, llm, window).start_polling(bot, handle_signals=True)
    database.close()


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in ("echo", "naive"):
        raise SystemExit("usage: python -m bench.floor_bots echo|naive")
    asyncio.run(main(sys.argv[1]))

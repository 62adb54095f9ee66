"""`tgbot doctor`'s jobs line: every chat with an active scheduled job is asked for
(`getChat`, which sends nothing); a chat the bot cannot reach is a ✘ naming its jobs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.app.preflight import check_database_url, sqlite_file
from bot.config import Settings
from bot.domain.jobs import Job

if TYPE_CHECKING:
    from adapters.telegram.probe import TelegramProbe

MAX_CHATS = 50
"""Chats asked about at most (one getChat each)."""


async def active_jobs(settings: Settings) -> tuple[Job, ...]:
    """The active jobs, read only; none when there is no database (or no jobs table) yet."""
    from storage.engine import create_engine_for
    from storage.jobs import SqlJobStore

    url = check_database_url(settings)
    database = sqlite_file(url)
    if database is not None and not database.is_file():
        return ()
    engine = create_engine_for(url)
    try:
        return await SqlJobStore(engine).list_jobs()
    except Exception:  # an older schema has no jobs table: nothing to check
        return ()
    finally:
        await engine.dispose()


async def job_chat_checks(settings: Settings, probe: TelegramProbe) -> list[tuple[bool, str]]:
    """(passed, detail) lines: one per chat the bot cannot reach, or one that all are
    reachable; nothing without active jobs."""
    jobs = await active_jobs(settings)
    if not jobs:
        return []
    by_chat: dict[int, list[Job]] = {}
    for job in jobs:
        by_chat.setdefault(job.chat_id, []).append(job)
    lines: list[tuple[bool, str]] = []
    for chat_id, chat_jobs in list(by_chat.items())[:MAX_CHATS]:
        if await probe.chat_name(chat_id) is None:
            names = ", ".join(job.name for job in chat_jobs)
            lines.append(
                (
                    False,
                    f"chat {chat_id} has scheduled {names} but the bot cannot reach it "
                    "(removed from it, or the chat is gone); fix: add the bot back, or "
                    f"/jobs cancel {chat_jobs[0].name}",
                )
            )
    if not lines:
        lines.append((True, f"{len(jobs)} active in {len(by_chat)} chats, all reachable"))
    return lines

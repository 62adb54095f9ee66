"""`[Already told the user]` notes in PostgreSQL, shared by every worker (implements
`bot.ports.SharedToldNotes`).

A `/help` answered by worker A must be known to the turn worker B runs next in that chat, so
the lines (`bot.services.told_lines.told_line`) go to `told_user_notes`, one row per line,
in the order they were sent (the row id). `take` reads a chat's newest `MAX_LINES` without
forgetting them and says up to which row it read; `confirm` forgets up to there once the
turn that carried them succeeded, so a failed turn leaves them for the next one. A chat
keeps at most `MAX_LINES` rows: an older one can never be shown.
"""

from __future__ import annotations

from functools import partial

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.ports import ToldNotes
from storage.plan import Plan, Run
from storage.postgres.jobs import FastPostgres

MAX_LINES = 5

_CHAT = (
    sa.bindparam("chat_id", type_=sa.BigInteger),
    sa.bindparam("thread_id", type_=sa.BigInteger),
)

_NOTE = sa.text(
    "INSERT INTO told_user_notes (chat_id, thread_id, line) VALUES (:chat_id, :thread_id, :line)"
).bindparams(*_CHAT)
_TRIM = sa.text(
    """
    DELETE FROM told_user_notes
    WHERE chat_id = :chat_id AND thread_id = :thread_id AND id <= (
        SELECT id FROM told_user_notes WHERE chat_id = :chat_id AND thread_id = :thread_id
        ORDER BY id DESC OFFSET :keep LIMIT 1
    )
    """
).bindparams(*_CHAT)
_TAKE = sa.text(
    """
    SELECT id, line FROM told_user_notes WHERE chat_id = :chat_id AND thread_id = :thread_id
    ORDER BY id DESC LIMIT :keep
    """
).bindparams(*_CHAT)
_CONFIRM = sa.text(
    "DELETE FROM told_user_notes "
    "WHERE chat_id = :chat_id AND thread_id = :thread_id AND id <= :upto"
).bindparams(*_CHAT, sa.bindparam("upto", type_=sa.BigInteger))


class SqlToldNotes:
    """Implements `bot.ports.SharedToldNotes` on PostgreSQL (see the module docstring)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._jobs = FastPostgres(engine)

    async def note(self, chat_id: int, thread_id: int, line: str) -> None:
        if not line:
            return
        chat = {"chat_id": chat_id, "thread_id": thread_id}
        await self._jobs.write_plan(partial(_note_plan, chat, line))

    async def take(self, chat_id: int, thread_id: int = 0) -> ToldNotes:
        rows = await self._jobs.one_read(
            _TAKE, {"chat_id": chat_id, "thread_id": thread_id, "keep": MAX_LINES}
        )
        if not rows:
            return ToldNotes(lines=(), upto=None)
        return ToldNotes(lines=tuple(str(r.line) for r in reversed(rows)), upto=int(rows[0].id))

    async def confirm(self, chat_id: int, thread_id: int, upto: int) -> None:
        await self._jobs.statement(
            _CONFIRM, {"chat_id": chat_id, "thread_id": thread_id, "upto": upto}
        )


def _note_plan(chat: dict[str, int], line: str) -> Plan[None]:
    yield Run(_NOTE, ({**chat, "line": line},))
    yield Run(_TRIM, ({**chat, "keep": MAX_LINES},))

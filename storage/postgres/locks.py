"""PostgreSQL advisory locks: per-chat mutual exclusion across worker processes.

`AdvisoryChatLock.hold(key, scope=...)` takes a session-level `pg_advisory_lock` on a
connection of its own (from a pool kept apart from the store's, so a hundred long turns cannot
starve the store of connections) and releases it in `finally`; `try_hold` takes it only if no
worker holds it (`pg_try_advisory_lock`, for the orphaned-turn scan); `hold_store` takes a
chat's "store" lock and, in the same statement, sees whether a worker holds its "join" lock
(messages waiting to join the conversation there, which later messages wait behind) by
taking that lock and giving it back when it is free. The lock id is a signed 64-bit hash of
(scope, platform, chat id, thread id): every worker computes the same id for a chat.
Taking and releasing run on the pooled connection's raw asyncpg connection, outside a
transaction (`storage.postgres.jobs.raw_connection`): one round trip each, no SQLAlchemy
statement path and no isolation-level switch to undo when the connection goes back.

A lock nobody holds (nearly every turn's) is taken without waiting on one connection the
worker keeps for that (`_SharedHolder`: `pg_try_advisory_lock`, one round trip, no
connection per turn: under a burst of a hundred chats the pool otherwise opened and closed a
connection per turn). Only a lock someone holds (another worker, or a turn of this worker on
that shared connection, where the lock would be granted again) is waited for on a connection
of its own. The shared connection runs one statement at a time; the requests that arrive
while one is out go together in the next (a burst's hundred turns lock and unlock in a few
round trips); each runs to its end even when its caller is cancelled: a lock granted to a
cancelled caller is released at once.

A session-level advisory lock dies with its connection, so whenever acquiring or releasing
on a connection of its own goes wrong (a cancelled wait, a lost connection) the connection
is invalidated, never handed back to the pool: a lock can never stay behind on a pooled
connection. A worker that crashes likewise frees its locks when PostgreSQL notices the
closed connection; a shared connection the server dropped loses the locks held on it, as a
connection of its own would.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import asyncpg
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from bot.domain.ids import SessionKey
from bot.errors import StorageError
from storage.engine import is_shared, normalise_url
from storage.postgres.jobs import dropped, raw_connection
from storage.reconnect import POOL_RECYCLE_SECONDS

log = logging.getLogger(__name__)

# run on the raw asyncpg connection, outside a transaction: one round trip each
_LOCK = "SELECT pg_advisory_lock($1::BIGINT)"
_TRY_LOCK = "SELECT pg_try_advisory_lock($1::BIGINT)"
_UNLOCK = "SELECT pg_advisory_unlock($1::BIGINT)"


def _peek(lock: str) -> str:
    """Whether another session holds `lock`: taken and given back at once when free
    (constant time, where reading pg_locks grows with every lock held)."""
    return (
        f"CASE WHEN pg_try_advisory_lock({lock}) THEN NOT pg_advisory_unlock({lock}) ELSE true END"
    )


# the lock first (a FROM subquery with a volatile call is run before the outer select), then
# the peek
_LOCK_AND_PEEK = f"SELECT {_peek('$2::BIGINT')} FROM (SELECT pg_advisory_lock($1::BIGINT)) AS held"
_UNLOCK_KIND, _TRY, _TRY_PEEK = 0, 1, 2
_PEEKED = 2
"""A try-and-peek's answer when the lock was granted and another session holds the other."""
_BATCH = (
    "SELECT CASE r.kind"
    f" WHEN {_UNLOCK_KIND} THEN pg_advisory_unlock(r.id)::int"
    f" WHEN {_TRY} THEN pg_try_advisory_lock(r.id)::int"
    f" ELSE CASE WHEN pg_try_advisory_lock(r.id) THEN 1 + ({_peek('r.peek')})::int ELSE 0 END"
    " END FROM unnest($1::int[], $2::bigint[], $3::bigint[]) AS r(kind, id, peek)"
)
"""The shared connection's requests of one round trip, answered row by row in their order
(a function scan's rows, no sort): a release 1 (released) or 0; a try 1 (granted) or 0; a
try with a peek 0 (not granted), 1 (granted) or `_PEEKED`."""
_FAILURES = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.InternalClientError,
    SQLAlchemyError,
    OSError,
)

LOCK_POOL_SIZE = 5
"""Idle connections kept for locks waited for; more are opened while more chats wait at once."""


def advisory_key(*parts: str | int) -> int:
    """A stable signed 64-bit lock id for `parts` (the same in every process and version)."""
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


MIGRATION_LOCK_ID = advisory_key("tgbot-migrate")
"""Held around a schema upgrade, so workers starting together migrate one at a time."""


def chat_key(key: SessionKey, scope: str) -> int:
    return advisory_key("tgbot-chat", scope, key.platform, key.chat_id, key.thread_id)


def create_lock_engine(url: str) -> AsyncEngine:
    """An engine for lock connections only: a small idle pool, no overflow limit."""
    parsed = normalise_url(url)
    if not is_shared(parsed):
        raise ValueError("advisory locks need PostgreSQL; use LocalChatLock with SQLite")
    return create_async_engine(
        parsed, pool_size=LOCK_POOL_SIZE, max_overflow=-1, pool_recycle=POOL_RECYCLE_SECONDS
    )


class _Dropped(Exception):
    """The lock's pooled connection had been dropped by the server."""


class AdvisoryChatLock:
    """Implements `bot.ports.ChatLock` with PostgreSQL advisory locks."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._shared = _SharedHolder(engine)

    @classmethod
    def for_url(cls, url: str) -> AdvisoryChatLock:
        return cls(create_lock_engine(url))

    @asynccontextmanager
    async def hold(self, key: SessionKey, *, scope: str = "turn") -> AsyncIterator[None]:
        async with self.hold_id(chat_key(key, scope)):
            yield

    @asynccontextmanager
    async def try_hold(self, key: SessionKey, *, scope: str = "turn") -> AsyncIterator[bool]:
        """Hold the chat's lock if no worker does, without waiting; yields whether held."""
        lock_id = chat_key(key, scope)
        granted, _ = await self._shared.try_take(lock_id)
        if not granted:
            yield False
            return
        try:
            yield True
        finally:
            await self._shared.release(lock_id)

    @asynccontextmanager
    async def hold_store(self, key: SessionKey) -> AsyncIterator[bool]:
        """The chat's "store" lock, and whether a worker holds its "join" lock (asked in
        the statement that takes the lock: no extra round trip). A join lock this worker
        holds on the shared connection is known here: that session would be granted it
        again, so asking there cannot see it."""
        lock_id, join_id = chat_key(key, "store"), chat_key(key, "join")
        granted, peeked = await self._shared.try_take(lock_id, peek=join_id)
        if granted:
            try:
                yield peeked or join_id in self._shared.held
            finally:
                await self._shared.release(lock_id)
            return
        conn, peeked = await self._lock(lock_id, wait=True, peek=join_id)
        assert conn is not None
        try:
            yield peeked or join_id in self._shared.held
        finally:
            await self._release(conn, lock_id)

    @asynccontextmanager
    async def hold_id(self, lock_id: int) -> AsyncIterator[None]:
        """Hold the advisory lock `lock_id` (waits, without polling, for the holder)."""
        granted, _ = await self._shared.try_take(lock_id)
        if granted:
            try:
                yield
            finally:
                await self._shared.release(lock_id)
            return
        conn = await self._acquire(lock_id)
        try:
            yield
        finally:
            await self._release(conn, lock_id)

    async def aclose(self) -> None:
        await self._shared.aclose()
        await self._engine.dispose()

    async def _acquire(self, lock_id: int) -> AsyncConnection:
        conn, _ = await self._lock(lock_id, wait=True)
        assert conn is not None
        return conn

    async def _lock(
        self, lock_id: int, *, wait: bool, peek: int | None = None
    ) -> tuple[AsyncConnection | None, bool]:
        """A connection holding `lock_id`, and with `peek` whether another session holds
        that lock; without `wait`, no connection when someone holds `lock_id`. A pooled
        connection the server dropped (`storage.reconnect`) is replaced once: the lock was
        not asked on it, so asking again on a fresh one is safe."""
        try:
            return await self._lock_once(lock_id, wait=wait, peek=peek)
        except _Dropped:
            log.info("lock connection was dropped; asking again on a fresh one")
        try:
            return await self._lock_once(lock_id, wait=wait, peek=peek)
        except _Dropped as dropped:
            raise StorageError(f"chat lock failed: {dropped.__cause__}") from dropped.__cause__

    async def _lock_once(
        self, lock_id: int, *, wait: bool, peek: int | None
    ) -> tuple[AsyncConnection | None, bool]:
        try:
            conn = await self._engine.connect()
            raw = await raw_connection(conn)
        except (SQLAlchemyError, asyncpg.InterfaceError) as exc:
            raise StorageError(f"no connection for a chat lock: {exc}") from exc
        peeked = False
        try:
            if peek is not None:
                peeked = bool(await raw.fetchval(_LOCK_AND_PEEK, lock_id, peek))
            elif wait:
                await raw.fetchval(_LOCK, lock_id)
            elif not await raw.fetchval(_TRY_LOCK, lock_id):
                await conn.close()  # nothing was granted: the connection is clean
                return None, False
        except BaseException as exc:
            # Cancelled while waiting, or the connection broke: the server may have granted
            # the lock anyway, so this connection must die with it rather than be pooled.
            await _discard(conn)
            if dropped(exc, raw):
                raise _Dropped from exc  # the server never saw the request
            if isinstance(exc, _FAILURES):
                raise StorageError(f"chat lock failed: {exc}") from exc
            raise
        return conn, peeked

    async def _release(self, conn: AsyncConnection, lock_id: int) -> None:
        try:
            raw = await raw_connection(conn)
            released = await raw.fetchval(_UNLOCK, lock_id)
        except BaseException:
            await _discard(conn)
            raise
        if not released:  # should never happen; a connection in doubt is not pooled
            log.error("advisory lock %s was not held at release", lock_id)
            await _discard(conn)
            return
        await conn.close()


async def _discard(conn: AsyncConnection) -> None:
    try:
        await conn.invalidate()
        await conn.close()
    except Exception:
        log.warning("closing a lock connection failed", exc_info=True)


class _SharedHolder:
    """The connection that holds every lock taken without waiting (see the module docstring).

    `held` are the lock ids held on it by this worker: one of them is never asked again here
    (PostgreSQL would grant it twice to one session), its second holder waits on a connection
    of its own. Requests that arrive while one round trip is out go together in the next
    (`_BATCH`, in the order they came): under a burst, a hundred turns' locks cost a few
    round trips, not a hundred."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._conn: AsyncConnection | None = None
        self._raw: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiting: list[_Ask] = []
        self._runner: asyncio.Task[None] | None = None
        self._pending: set[asyncio.Future[Any]] = set()
        self.held: set[int] = set()

    async def try_take(self, lock_id: int, *, peek: int | None = None) -> tuple[bool, bool]:
        """Whether the lock was free and is now held here; with `peek`, also whether another
        session holds that lock (asked in the same statement, when the lock was granted)."""
        if lock_id in self.held:
            return False, False
        self.held.add(lock_id)
        asked = self._ask(_TRY if peek is None else _TRY_PEEK, lock_id, peek or 0)
        try:
            answer = await asyncio.shield(asked)
        except asyncio.CancelledError:
            asked.add_done_callback(lambda done: self._after_cancelled_try(done, lock_id))
            raise
        except BaseException:
            self.held.discard(lock_id)
            raise
        if not answer:
            self.held.discard(lock_id)
        return answer > 0, answer == _PEEKED

    async def release(self, lock_id: int) -> None:
        try:
            released = await asyncio.shield(self._ask(_UNLOCK_KIND, lock_id, 0))
        except _FAILURES as exc:
            log.warning("advisory lock %s: its shared connection was lost (%s)", lock_id, exc)
            return
        finally:
            self.held.discard(lock_id)
        if not released:
            log.error("advisory lock %s was not held at release", lock_id)

    async def aclose(self) -> None:
        conn, self._conn, self._raw = self._conn, None, None
        if conn is not None and self._loop is asyncio.get_running_loop():
            await conn.close()  # frees every lock still held on it

    def _after_cancelled_try(self, done: asyncio.Future[Any], lock_id: int) -> None:
        """A try whose caller was cancelled: a lock it was granted is released at once."""
        if done.cancelled() or done.exception() is not None or not done.result():
            self.held.discard(lock_id)
            return
        undo = asyncio.ensure_future(self.release(lock_id))
        self._pending.add(undo)
        undo.add_done_callback(self._pending.discard)

    def _ask(self, kind: int, lock_id: int, peek: int) -> asyncio.Future[int]:
        """Queue one request for the next round trip; its answer (`_BATCH`) comes back in
        the future, which the caller's cancellation does not cancel (it is shielded)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a connection belongs to the loop it was opened on
            self._loop, self._conn, self._raw, self._waiting = loop, None, None, []
            self._runner = None
        answer: asyncio.Future[int] = loop.create_future()
        self._waiting.append(_Ask(kind, lock_id, peek, answer))
        if self._runner is None or self._runner.done():
            self._runner = loop.create_task(self._send_waiting())
        return answer

    async def _send_waiting(self) -> None:
        """Send what waits, one round trip at a time, until nothing does; a statement runs
        to its end even when every caller of it was cancelled."""
        while self._waiting:
            batch, self._waiting = self._waiting, []
            try:
                await self._answer(batch)
            except BaseException as exc:
                for ask in batch:
                    if not ask.answer.done():
                        ask.answer.set_exception(exc)
                if isinstance(exc, asyncio.CancelledError):
                    raise

    async def _answer(self, batch: list[_Ask]) -> None:
        """Run the batch on the shared connection and answer each request; on a connection
        the server had dropped, its tries are asked once more on a fresh one (the dead
        session held nothing) and its releases fail."""
        for attempt in (1, 2):
            raw = await self._connection()
            try:
                rows = await raw.fetch(
                    _BATCH,
                    [ask.kind for ask in batch],
                    [ask.lock_id for ask in batch],
                    [ask.peek for ask in batch],
                )
            except Exception as exc:
                if not dropped(exc, raw) or attempt == 2:
                    raise
                await _discard(self._conn)  # type: ignore[arg-type]
                self._conn = self._raw = None
                for ask in batch:
                    if ask.kind == _UNLOCK_KIND:
                        ask.answer.set_exception(exc)
                batch = [ask for ask in batch if ask.kind != _UNLOCK_KIND]
                if not batch:
                    return
                continue
            for ask, row in zip(batch, rows, strict=True):
                if not ask.answer.done():
                    ask.answer.set_result(int(row[0]))
            return

    async def _connection(self) -> Any:
        if self._raw is None:
            try:
                self._conn = await self._engine.connect()
                self._raw = await raw_connection(self._conn)
            except SQLAlchemyError as exc:
                raise StorageError(f"no connection for a chat lock: {exc}") from exc
        return self._raw


@dataclass(frozen=True, slots=True)
class _Ask:
    """One request to the shared connection: `kind` (`_UNLOCK_KIND`, `_TRY`, `_TRY_PEEK`)."""

    kind: int
    lock_id: int
    peek: int
    answer: asyncio.Future[int]

"""Live dashboard events across workers through PostgreSQL LISTEN/NOTIFY (implements
`bot.app.dashboard.live.LiveChannel`; no other service).

Every worker publishes the live events of its own runtime (model calls, trims, errors) with
`pg_notify` on the channel `tgbot_live`, and every dashboard served by a worker LISTENs on
it, so the page served by worker A shows worker B's events. A message published by one
`PgLiveChannel` is not delivered back to that same object's listener (each message carries
the channel's random `origin`): a worker sees its own events straight from its runtime.

- **Bounded payload.** PostgreSQL refuses a NOTIFY payload of 8000 bytes or more, so
  `bounded_payload` shortens the longest strings (an error text, a model name) until the
  JSON fits in `MAX_PAYLOAD_BYTES`, and drops the event's data as a last resort; publishing
  never fails a turn.
- **Never in the turn's way.** `publish` only queues (`QUEUE_SIZE`, the oldest dropped when
  full); one background task sends, on a connection of its own, everything queued meanwhile
  in one round trip (asyncpg's pipelined `executemany`, outside SQLAlchemy). While the
  database is away the events are dropped (they are live, a stale one is worthless) and the
  failure is logged once per outage.
- **A dead worker** just stops publishing: nothing waits for it. **A lost LISTEN
  connection** (PostgreSQL restarted, the backend terminated, a half-open socket caught by
  the ping every `PING_SECONDS`) is re-established with exponential backoff
  (`BACKOFF_FIRST` doubling to `BACKOFF_MAX`); the loss is logged once, the recovery once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from storage.engine import is_shared, normalise_url
from storage.postgres.jobs import raw_connection

log = logging.getLogger("tgbot.live")

CHANNEL = "tgbot_live"
MAX_PAYLOAD_BYTES = 7900
"""Under PostgreSQL's NOTIFY limit (8000 bytes in a default build), with room to spare."""
QUEUE_SIZE = 1024
PING_SECONDS = 10.0
BACKOFF_FIRST = 0.5
BACKOFF_MAX = 30.0
MIN_STRING = 24
"""A string is never shortened below this many characters (ids, kinds and dates stay)."""

_NOTIFY = "SELECT pg_notify($1, $2)"
SEND_BATCH = 64
"""At most this many queued messages go in one round trip."""
_PING = sa.text("SELECT 1")


def bounded_payload(message: Mapping[str, Any], limit: int = MAX_PAYLOAD_BYTES) -> str:
    """`message` as compact JSON of at most `limit` UTF-8 bytes: while it is too long, the
    longest string anywhere in it is cut in half (ending in "…"); if that is not enough
    (thousands of small fields), the values under `data` are replaced by
    `{"truncated": true}`. Values JSON cannot encode become their `str`."""
    value = json.loads(_dumps(message))  # a private copy, strings only where JSON has them
    payload = _dumps(value)
    while len(payload.encode()) > limit:
        path = _longest_string(value)
        if path is None:
            break
        holder, key = path
        text = holder[key]
        holder[key] = text[: max(MIN_STRING, len(text) // 2) - 1] + "…"
        payload = _dumps(value)
    if len(payload.encode()) > limit and isinstance(value, dict):
        value["data"] = {"truncated": True}
        payload = _dumps(value)
    if len(payload.encode()) > limit:  # only the envelope is left: send nothing of it
        payload = _dumps({"truncated": True})
    return payload


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _longest_string(value: Any) -> tuple[Any, Any] | None:
    """(container, key) of the longest string still longer than `MIN_STRING`, or None."""
    best: tuple[Any, Any] | None = None
    best_len = MIN_STRING
    stack = [value]
    while stack:
        node = stack.pop()
        items: Any = node.items() if isinstance(node, dict) else enumerate(node)
        for key, item in items:
            if isinstance(item, str) and len(item) > best_len:
                best, best_len = (node, key), len(item)
            elif isinstance(item, dict | list):
                stack.append(item)
    return best


class PgLiveChannel:
    """Live events between the workers of one PostgreSQL database (module docstring)."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        channel: str = CHANNEL,
        ping_seconds: float = PING_SECONDS,
        backoff_first: float = BACKOFF_FIRST,
        backoff_max: float = BACKOFF_MAX,
    ) -> None:
        self._engine = engine
        self.channel = channel
        self.origin = uuid.uuid4().hex
        """Stamped on every message this object publishes; its listener skips them."""
        self.ping_seconds = ping_seconds
        self.backoff_first = backoff_first
        self.backoff_max = backoff_max
        self._queue: asyncio.Queue[str] = asyncio.Queue(QUEUE_SIZE)
        self._sender: asyncio.Task[None] | None = None
        self._closed = False
        self.dropped = 0
        """Messages dropped: the queue was full or the database away."""
        self.listening = asyncio.Event()
        """Set while the LISTEN connection is up (tests wait on it)."""

    @classmethod
    def for_url(cls, url: str, **options: Any) -> PgLiveChannel:
        """Its own connections (no pool: one to send, one to listen), apart from the store."""
        parsed = normalise_url(url)
        if not is_shared(parsed):
            raise ValueError("LISTEN/NOTIFY needs PostgreSQL; SQLite is one process")
        return cls(create_async_engine(parsed, poolclass=NullPool), **options)

    # ------------------------------------------------------------ publishing

    def publish(self, message: Mapping[str, Any]) -> None:
        """Queue `message` for every other worker's listeners; never blocks, never raises."""
        if self._closed:
            return
        try:
            payload = bounded_payload({**message, "origin": self.origin})
        except (TypeError, ValueError) as exc:  # a value JSON cannot hold even as str
            log.warning("live events: an event could not be encoded (%s)", exc)
            return
        if self._queue.full():
            with contextlib.suppress(asyncio.QueueEmpty):
                self._queue.get_nowait()
                self.dropped += 1
        self._queue.put_nowait(payload)
        if self._sender is None:
            self._sender = asyncio.get_running_loop().create_task(self._send_loop())

    async def settled(self) -> None:
        """Wait until everything queued so far was sent or dropped (tests, shutdown)."""
        await self._queue.join()

    async def _send_loop(self) -> None:
        conn: AsyncConnection | None = None
        raw: Any = None
        failing = False
        try:
            while True:
                batch = [await self._queue.get()]
                while len(batch) < SEND_BATCH and not self._queue.empty():
                    batch.append(self._queue.get_nowait())
                try:
                    if conn is None:
                        conn = await self._engine.connect()
                        raw = await raw_connection(conn)
                    await raw.executemany(_NOTIFY, [(self.channel, p) for p in batch])
                    if failing:
                        log.info("live events: publishing again")
                        failing = False
                except Exception as exc:  # the database away: drop, say so once
                    self.dropped += len(batch)
                    if not failing:
                        log.warning("live events: could not publish (%s); dropping them", exc)
                        failing = True
                    await _discard(conn)
                    conn = raw = None
                finally:
                    for _sent in batch:
                        self._queue.task_done()
        finally:
            await _discard(conn)

    async def _connect(self) -> AsyncConnection:
        conn = await self._engine.connect()
        return await conn.execution_options(isolation_level="AUTOCOMMIT")

    # ------------------------------------------------------------ listening

    async def listen(self, deliver: Callable[[dict[str, Any]], None]) -> None:
        """Hand every other worker's message to `deliver` until cancelled, reconnecting with
        backoff whenever the connection is lost (see the module docstring)."""
        backoff = self.backoff_first
        lost = False
        while True:
            conn: AsyncConnection | None = None
            try:
                conn = await self._connect()
                gone = await self._subscribe(conn, deliver)
                if lost:
                    log.info("live events: listening again")
                lost, backoff = False, self.backoff_first
                self.listening.set()
                await self._watch(conn, gone)
            except Exception as exc:
                if not lost:
                    log.warning("live events: LISTEN lost (%s); reconnecting with backoff", exc)
                    lost = True
            finally:
                self.listening.clear()
                await _discard(conn)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self.backoff_max)

    async def _subscribe(
        self, conn: AsyncConnection, deliver: Callable[[dict[str, Any]], None]
    ) -> asyncio.Event:
        """LISTEN on `conn`; the event returned is set when the connection closes."""
        raw = (await conn.get_raw_connection()).driver_connection
        assert raw is not None
        gone = asyncio.Event()

        def received(_conn: object, _pid: int, _channel: str, payload: str) -> None:
            try:
                message = json.loads(payload)
            except ValueError:
                return
            if not isinstance(message, dict) or message.pop("origin", None) == self.origin:
                return
            try:
                deliver(message)
            except Exception:  # a broken consumer must not end the listening
                log.exception("live events: delivering an event failed")

        raw.add_termination_listener(lambda _conn: gone.set())
        await raw.add_listener(self.channel, received)
        return gone

    async def _watch(self, conn: AsyncConnection, gone: asyncio.Event) -> None:
        """Return never; raise once the connection is closed or stops answering a ping."""
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.ping_seconds):
                    await gone.wait()
            if gone.is_set():
                raise ConnectionError("the connection closed")
            async with asyncio.timeout(self.ping_seconds):
                await conn.execute(_PING)  # catches a half-open socket

    async def aclose(self) -> None:
        """Stop sending (what is still queued is dropped) and close the connections."""
        self._closed = True
        if self._sender is not None:
            self._sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sender
        await self._engine.dispose()


async def _discard(conn: AsyncConnection | None) -> None:
    """Close a connection that may be broken; a failure to close is not an error."""
    if conn is None:
        return
    try:
        await conn.invalidate()
        await conn.close()
    except Exception:
        log.debug("closing a live-events connection failed", exc_info=True)

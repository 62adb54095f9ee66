"""Per-route token corrections in PostgreSQL, shared by every worker (implements
`bot.ports.SharedTokenCorrections`) without a row lock per call.

Each worker learns in memory (`bot.agent.metering`, `TokenTruth`) and, every few seconds while calls
keep coming, upserts its own row per route in `token_correction_workers` (route, worker,
ratio, samples: the calls this worker learned from itself, updated_at), one statement for
all its routes. No two workers write the same row, so nothing waits on a lock. What the
workers share is the samples-weighted mean, in log space, of each route's rows updated within
`KEEP` (`load`, and the answer of `publish`); its samples are the rows' sum, so it counts
every call of every live worker once. Rows older than `KEEP` are deleted as a worker
publishes: a worker that stopped a day ago no longer counts.
"""

from __future__ import annotations

import datetime as dt
import os
import secrets
import socket
from collections.abc import Mapping

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.context.tokens import MAX_RATIO, MIN_RATIO, TokenCorrection

KEEP = dt.timedelta(days=1)
"""A worker row older than this is neither counted nor kept."""

_UPSERT = sa.text(
    "INSERT INTO token_correction_workers (route, worker, ratio, samples, updated_at) "
    "VALUES (:route, :worker, :ratio, :samples, now()) "
    "ON CONFLICT (route, worker) DO UPDATE SET ratio = excluded.ratio, "
    "samples = excluded.samples, updated_at = excluded.updated_at"
).bindparams(
    sa.bindparam("route", type_=sa.Text),
    sa.bindparam("worker", type_=sa.Text),
    sa.bindparam("ratio", type_=sa.Float),
    sa.bindparam("samples", type_=sa.Integer),
)
_FORGET = sa.text(
    "DELETE FROM token_correction_workers WHERE updated_at < now() - :keep"
).bindparams(sa.bindparam("keep", type_=sa.Interval))
_MERGED = sa.text(
    "SELECT route, exp(sum(samples * ln(ratio)) / sum(samples)) AS ratio, "
    "sum(samples) AS samples FROM token_correction_workers "
    "WHERE updated_at >= now() - :keep AND samples > 0 AND ratio > 0 GROUP BY route"
).bindparams(sa.bindparam("keep", type_=sa.Interval))


def worker_id() -> str:
    """This process, distinct from every other: host, pid and a random tail (a pid is
    reused after a restart)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


class SqlTokenCorrections:
    """Implements `bot.ports.SharedTokenCorrections` on PostgreSQL."""

    def __init__(self, engine: AsyncEngine, *, worker: str | None = None) -> None:
        self._engine = engine
        self.worker = worker or worker_id()

    async def load(self) -> dict[str, TokenCorrection]:
        async with self._engine.connect() as conn:
            return await _merged(conn)

    async def publish(self, own: Mapping[str, TokenCorrection]) -> dict[str, TokenCorrection]:
        """Write this worker's rows (`own`: its ratio and the calls it learned from, per
        route), forget rows older than `KEEP`, and return every route's shared state."""
        async with self._engine.begin() as conn:
            if own:
                await conn.execute(
                    _UPSERT,
                    [
                        {
                            "route": route,
                            "worker": self.worker,
                            "ratio": state.ratio,
                            "samples": state.samples,
                        }
                        for route, state in sorted(own.items())
                    ],
                )
            await conn.execute(_FORGET, {"keep": KEEP})
            return await _merged(conn)


async def _merged(conn: AsyncConnection) -> dict[str, TokenCorrection]:
    rows = (await conn.execute(_MERGED, {"keep": KEEP})).all()
    return {
        str(r.route): TokenCorrection(
            ratio=min(max(float(r.ratio), MIN_RATIO), MAX_RATIO), samples=int(r.samples)
        )
        for r in rows
    }

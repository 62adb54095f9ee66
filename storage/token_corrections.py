"""Per-route token corrections in PostgreSQL, shared by every worker (implements
`bot.ports.SharedTokenCorrections`).

With a JSON file per process the workers learned from a fraction of the calls each and the
last writer won. Here every call's (estimate, reported) pair moves the one row of its route
in `token_corrections`: the row is read `FOR UPDATE`, stepped by the pure
`bot.context.token_correction.observe`, and written back in one transaction, so two workers
observing at once apply both steps, one after the other.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.context.token_correction import TokenCorrection, observe

_ROUTE = sa.bindparam("route", type_=sa.Text)
_ENSURE = sa.text(
    "INSERT INTO token_corrections (route, ratio, samples) VALUES (:route, 1.0, 0) "
    "ON CONFLICT (route) DO NOTHING"
).bindparams(_ROUTE)
_LOCK = sa.text(
    "SELECT ratio, samples FROM token_corrections WHERE route = :route FOR UPDATE"
).bindparams(_ROUTE)
_WRITE = sa.text(
    "UPDATE token_corrections SET ratio = :ratio, samples = :samples WHERE route = :route"
).bindparams(
    _ROUTE, sa.bindparam("ratio", type_=sa.Float), sa.bindparam("samples", type_=sa.Integer)
)
_ALL = sa.text("SELECT route, ratio, samples FROM token_corrections")


class SqlTokenCorrections:
    """Implements `bot.ports.SharedTokenCorrections` on PostgreSQL."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def load(self) -> dict[str, TokenCorrection]:
        async with self._engine.connect() as conn:
            rows = (await conn.execute(_ALL)).all()
        return {
            str(r.route): TokenCorrection(ratio=float(r.ratio), samples=int(r.samples))
            for r in rows
        }

    async def observe(self, route: str, *, estimated: int, reported: int) -> TokenCorrection:
        async with self._engine.begin() as conn:
            await conn.execute(_ENSURE, {"route": route})
            row = (await conn.execute(_LOCK, {"route": route})).one()
            before = TokenCorrection(ratio=float(row.ratio), samples=int(row.samples))
            after = observe(before, estimated=estimated, reported=reported)
            if after != before:
                await conn.execute(
                    _WRITE, {"route": route, "ratio": after.ratio, "samples": after.samples}
                )
            return after

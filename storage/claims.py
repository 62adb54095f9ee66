"""`SqlClaims`: work done once across processes, on SQL (`bot.store_ports.Claims`)."""

from __future__ import annotations

from datetime import date

from storage.executor import Database
from storage.tables import SUMMARIES, UPDATES


class SqlClaims:
    """`bot.store_ports.Claims` on a `storage.executor.Database`."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def claim_update(self, update_id: int) -> bool:
        async with self._db.write() as conn:
            stmt = (
                self._db.parts.insert(UPDATES)
                .values(update_id=update_id, processed_at=self._db.now())
                .on_conflict_do_nothing(index_elements=["update_id"])
                .returning(UPDATES.c.update_id)
            )
            return (await conn.execute(stmt)).first() is not None

    async def claim_daily_summary(self, day: date) -> bool:
        async with self._db.write() as conn:
            stmt = (
                self._db.parts.insert(SUMMARIES)
                .values(day=day, claimed_at=self._db.now())
                .on_conflict_do_nothing(index_elements=["day"])
                .returning(SUMMARIES.c.day)
            )
            return (await conn.execute(stmt)).first() is not None

"""Group commit of inbound messages: a whole `getUpdates` batch in one transaction, retried.

Storing one message on its own costs a write transaction of its own; a batch costs a fixed
handful of statements, whatever its size (`storage.record_write.inbound_plan`, which also
says what it runs). Here: an item that cannot be encoded is logged and skipped; a statement
that fails on bad data splits the batch into single items, so only the bad one is skipped;
any other failure (a locked or lost database) retries the whole transaction.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from functools import partial

from bot.domain.records import StoredRecord
from bot.errors import StorageUnavailable
from bot.ports import InboundAppend
from bot.retry import with_retries
from storage.plan import Plan, SqlParts
from storage.record_write import Encoded, inbound_plan
from storage.refused_rows import DRIVER_DATA_ERRORS, bad_data, reason_of, skip

log = logging.getLogger(__name__)

TRIES = 4
"""Attempts of a batch's transaction when the database is busy or away."""

WritePlan = Callable[
    [Callable[[], Plan[dict[int, StoredRecord]]]], Awaitable[dict[int, StoredRecord]]
]
"""Runs a plan (made afresh by the callable) in one write transaction; database errors
become `StorageUnavailable` with the database error as its cause."""


class InboundBatchWriter:
    """`append_inbound` of the SQL store: `write` runs `inbound_plan` in a transaction."""

    def __init__(self, write: WritePlan, parts: SqlParts, now: Callable[[], datetime]) -> None:
        self._write = write
        self._parts = parts
        self._now = now

    async def append(self, items: Sequence[InboundAppend]) -> tuple[StoredRecord | None, ...]:
        results: list[StoredRecord | None] = [None] * len(items)
        encoded: list[Encoded] = []
        for index, item in enumerate(items):
            try:
                encoded.append(Encoded.of(index, item))
            except Exception as exc:
                skip(item, f"{type(exc).__name__}: {exc}")
        if encoded:
            await self._commit(encoded, results)
        return tuple(results)

    async def _commit(self, batch: list[Encoded], results: list[StoredRecord | None]) -> None:
        """Store `batch` in one transaction (retried whole); on bad data, each item alone."""
        plan = partial(inbound_plan, self._parts, batch, self._now())
        try:
            stored = await with_retries(
                partial(self._write, plan),
                retries=TRIES - 1,
                first_delay=0.05,
                transient=(StorageUnavailable, *DRIVER_DATA_ERRORS),
                retry_if=lambda exc: not bad_data(exc),
                on_retry=lambda exc: log.warning(
                    "storing a batch failed (%s); retrying the whole batch", exc
                ),
            )
        except (StorageUnavailable, *DRIVER_DATA_ERRORS) as exc:
            if not bad_data(exc):
                raise
            if len(batch) == 1:
                skip(batch[0].item, reason_of(exc))
                return
            for entry in batch:  # find the bad one: each item alone
                await self._commit([entry], results)
            return
        for index, record in stored.items():
            results[index] = record

"""A failed write, the rows' fault or the database's (`bad_data`): what the store's batch
writer (`storage.inbound_batch`) retries and what it splits, so that only a bad message is
skipped (`skip`, logged with its reason).
"""

from __future__ import annotations

import logging

from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, StatementError

from bot.errors import StorageUnavailable
from bot.ports import InboundAppend
from storage.executor import DATA_ERRORS

log = logging.getLogger("storage.inbound_batch")


def skip(item: InboundAppend, reason: str) -> None:
    log.warning(
        "not storing message %s/%s: %s",
        item.platform_message.chat_id,
        item.platform_message.message_id,
        reason,
    )


DRIVER_DATA_ERRORS = (OverflowError, ValueError, TypeError)
"""What a driver raises, unwrapped, for a value it cannot send (sqlite3: an int past 64 bits)."""
JOB_DATA_ERRORS: tuple[type[BaseException], ...] = (*DRIVER_DATA_ERRORS, *DATA_ERRORS)
"""Those, and what the database refuses about a row when SQLAlchemy is not there to wrap it
(a whole job, `storage.executor.jobs_for`: the cause of its `StorageUnavailable`)."""


def bad_data(exc: BaseException) -> bool:
    """A failure caused by the rows themselves (retrying cannot help), not the database:
    a constraint or a value the database refuses (SQLAlchemy's error, or on SQLite's fast
    path the driver's own), or one the driver cannot send (asyncpg raises its own
    `DataError`, a ValueError, which SQLAlchemy passes on as a generic error), found
    anywhere along the chain of causes."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, (IntegrityError, DataError, *JOB_DATA_ERRORS)):
            return True
        if isinstance(current, StatementError) and not isinstance(current, DBAPIError):
            return True  # SQLAlchemy could not process the parameters
        orig = getattr(current, "orig", None)
        todo += [current.__cause__, orig if isinstance(orig, BaseException) else None]
    return False


def reason_of(exc: BaseException) -> str:
    cause = exc.__cause__ if isinstance(exc, StorageUnavailable) else exc
    return f"{type(cause).__name__}: {cause}"

"""The work SQLAlchemy's adapter hands a connection's thread: statements, a held `BEGIN`, commit.

Each is a `storage.sqlite.worker.Work`, run in order on the connection's thread (or by the
event loop itself: `storage.sqlite.driver.Connection._run`); `storage.sqlite.cursor` asks
for the statements, the connection for the rest. The whole jobs the store runs without
SQLAlchemy (`plain`, `transaction`) stay in `storage.sqlite.worker`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from storage.sqlite.worker import Description, Row, Work, Worker


def statement(operation: str, parameters: Any) -> Work:
    def work(here: Worker) -> tuple[Description, int, int | None, list[Row]]:
        cursor = here.open().execute(operation, () if parameters is None else parameters)
        try:
            description = cursor.description
            rows = cursor.fetchall() if description is not None else []
            return description, cursor.rowcount, cursor.lastrowid, rows
        finally:
            cursor.close()

    return work


def begun(begin: str, work: Work) -> Work:
    def begun(here: Worker) -> Any:
        here.open().execute(begin)
        return work(here)

    return begun


def statements(operation: str, seq_of_parameters: Iterable[Any]) -> Work:
    def work(here: Worker) -> tuple[int, int | None]:
        cursor = here.open().executemany(operation, seq_of_parameters)
        try:
            return cursor.rowcount, cursor.lastrowid
        finally:
            cursor.close()

    return work


def commit(here: Worker) -> None:
    here.open().commit()


def rollback(here: Worker) -> None:
    here.open().rollback()

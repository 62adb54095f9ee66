"""The SQLAlchemy executor of write plans (`storage.plan`), and each database's parts.

The one place a connection's database picks what differs: `parts_for` hands a plan the
database's sub-plans (`storage.sqlite.parts`, `storage.postgres.parts`).
"""

from __future__ import annotations

from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from storage.plan import Plan, Rows, SqlParts
from storage.postgres.parts import POSTGRES
from storage.sqlite.parts import SQLITE

T = TypeVar("T")

_PARTS: dict[str, SqlParts] = {"sqlite": SQLITE, "postgresql": POSTGRES}


def parts_for(engine: AsyncEngine | AsyncConnection) -> SqlParts:
    """The sub-plans of the engine's (or connection's) database."""
    try:
        return _PARTS[engine.dialect.name]
    except KeyError:
        raise ValueError(f"unsupported database: {engine.dialect.name}") from None


async def run_plan(conn: AsyncConnection, plan: Plan[T]) -> T:
    """Drive `plan` on `conn`, in the caller's transaction; its result. An error a statement
    raises propagates, the plan abandoned."""
    answer: Any = None
    try:
        while True:
            step = plan.send(answer)
            if isinstance(step, Rows):
                answer = (await conn.execute(step.statement, step.params)).all()
            else:
                await conn.execute(step.statement, step.params)
                answer = None
    except StopIteration as stop:
        result: T = stop.value
        return result
    finally:
        plan.close()

"""`run_plan`: a plan (`storage.plan`) driven on a SQLAlchemy connection, statement by statement.

The executor of plans where no whole job runs them: `storage.executor.Database` without
jobs, and the store's code that already holds a SQLAlchemy connection.
"""

from __future__ import annotations

from typing import Any, TypeVar

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from storage.plan import Plan, Rows

T = TypeVar("T")


async def run_plan(conn: AsyncConnection, plan: Plan[T]) -> T:
    """Drive `plan` on `conn`, in the caller's transaction; its result. An error a statement
    raises propagates, the plan abandoned."""
    answer: Any = None
    try:
        while True:
            step = plan.send(answer)
            if isinstance(step, Rows):
                answer = (await conn.execute(step.statement, step.params)).all()
            elif isinstance(step.statement, str):  # SQL with its values written in
                await conn.execute(text(step.statement))
                answer = None
            else:
                await conn.execute(step.statement, step.params)
                answer = None
    except StopIteration as stop:
        result: T = stop.value
        return result
    finally:
        plan.close()

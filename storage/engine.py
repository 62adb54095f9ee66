"""The async engine for a database URL, and the one place a database's backend is chosen.

`backend_for` maps a URL, an engine or a connection to its `storage.backend.Backend`
(`storage.sqlite.backend.SQLITE`: SQLite tuned for a bot; `storage.postgres.backend.POSTGRES`:
PostgreSQL on asyncpg); everything that differs between the two is asked of it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from storage.backend import Backend
from storage.postgres.backend import POSTGRES
from storage.sqlite.backend import ONE_STATEMENT_OPTION, SQLITE, WRITE_OPTION

BUSY_TIMEOUT_MS = 10_000
WRITE: dict[str, Any] = {WRITE_OPTION: True}
"""Execution options of a connection that will write (SQLite: `BEGIN IMMEDIATE`)."""
ONE_STATEMENT: dict[str, Any] = {ONE_STATEMENT_OPTION: True}
"""Execution options of a connection that runs a single read (SQLite: no `BEGIN`)."""

_BACKENDS: dict[str, Backend] = {backend.name: backend for backend in (SQLITE, POSTGRES)}


def backend_for(where: URL | Any) -> Backend:
    """The backend of a URL, or of anything with SQLAlchemy's `dialect` (an engine, a
    connection, Alembic's bind)."""
    name = where.get_backend_name() if isinstance(where, URL) else where.dialect.name
    try:
        return _BACKENDS[name]
    except KeyError:
        raise ValueError(f"unsupported database: {name}") from None


def normalise_url(url: str) -> URL:
    """`sqlite:` and `postgresql:` / `postgres:` URLs get their async driver."""
    parsed = make_url(url.replace("postgres://", "postgresql://", 1))
    backend = _BACKENDS.get(parsed.drivername)  # a bare name: no driver given
    return parsed if backend is None else parsed.set(drivername=backend.driver)


def is_shared(url: URL) -> bool:
    """Whether several processes may use the URL's database at once (`Backend.shared`)."""
    return backend_for(url).shared


def create_engine_for(url: str, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> AsyncEngine:
    """An engine for `url` (`Backend.engine`); for a SQLite file, its directory is created,
    and a writer that finds the database locked waits up to `busy_timeout_ms` before it
    fails."""
    parsed = normalise_url(url)
    return backend_for(parsed).engine(parsed, busy_timeout_ms)


def sqlite_file(url: str) -> Path | None:
    """The database file of a URL (`None`: a server, or in memory)."""
    parsed = normalise_url(url)
    return backend_for(parsed).database_file(parsed)


def create_readonly_engine(url: str, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> AsyncEngine:
    """An engine that only reads (`Backend.readonly_engine`: a SQLite file opened read-only,
    see `storage.sqlite.backend.create_readonly_engine`; other databases get the ordinary
    engine, the dashboard's queries only read)."""
    parsed = normalise_url(url)
    return backend_for(parsed).readonly_engine(parsed, busy_timeout_ms)

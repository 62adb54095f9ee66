"""Shared fixtures. PostgreSQL tests need TEST_POSTGRES_URL (scripts/with-postgres sets it)."""

from __future__ import annotations

import asyncio
import gc
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, settings

# Property tests judge behaviour, never speed: a loaded machine (helpers running suites in
# parallel, CI on two cores) must not fail an example for taking longer than 200 ms.
settings.register_profile(
    "loaded", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.load_profile("loaded")

# Importing the test modules builds about a million long-lived objects (aiogram's pydantic
# models, SQLAlchemy, the Telegram corpus); the cyclic collector would walk all of them again
# each time the heap grows by a quarter, seconds of CPU for nothing. So it waits until the
# tests are collected, then collects once and freezes what is there: each later collection
# walks only what the tests themselves allocate.
gc.disable()

# Compiled modules and pytest's rewritten test modules are cached in __pycache__ even where
# the environment says not to (PYTHONDONTWRITEBYTECODE=1 on some machines): without the cache
# every xdist worker compiles the whole tree and rewrites every test module's asserts again,
# about 3 s of CPU per worker per run. The workers start after this file is read and inherit
# the environment.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


def worker_database_url(url: str, worker: str) -> tuple[str, str, str]:
    """For `url` (TEST_POSTGRES_URL) and an xdist worker id: the URL of the worker's own
    database, the URL of the server's `postgres` database (to create it from) and its name."""
    head, _, name = url.rpartition("/")
    name, _, query = name.partition("?")
    own = f"{name}_{worker}".lower()
    if not own.replace("_", "").isalnum():
        raise ValueError(f"cannot name a database after {name!r} and worker {worker!r}")
    suffix = f"?{query}" if query else ""
    return f"{head}/{own}{suffix}", f"{head}/postgres{suffix}", own


async def _recreate_database(server_url: str, name: str) -> None:
    import asyncpg  # type: ignore[import-untyped]

    dsn = server_url.replace("postgresql+asyncpg://", "postgresql://", 1)
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()


def _database_per_worker() -> None:
    """Under pytest-xdist every worker gets its own PostgreSQL database on the server of
    TEST_POSTGRES_URL (made empty here), and TEST_POSTGRES_URL names it: tests that reset the
    `public` schema never reset another worker's. Runs before any test module is imported
    (the modules read TEST_POSTGRES_URL when imported), and before `tgbot` subprocesses
    inherit the environment."""
    url = os.environ.get("TEST_POSTGRES_URL")
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not url or not worker:
        return
    own_url, server_url, name = worker_database_url(url, worker)
    asyncio.run(_recreate_database(server_url, name))
    os.environ["TEST_POSTGRES_URL"] = own_url


_database_per_worker()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Slow tests first (the order otherwise kept): most of them wait on another process
    (Telegram's group pace, a cron minute), so started first they overlap the fast tests
    on the other workers instead of starting last and running alone at the end."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_collection_finish(session: pytest.Session) -> None:
    del session
    gc.collect()
    gc.freeze()
    gc.enable()


@pytest.fixture(autouse=True)
def _clean_bot_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never read the developer's real bot settings from the environment."""
    for name in list(os.environ):
        if name.startswith(("BOT_", "LLM_", "TELEGRAM_")) or name in {
            "OWNER_ID",
            "DATABASE_URL",
            "DATA_DIR",
        }:
            monkeypatch.delenv(name, raising=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    """`pytest -m "not slow"` is the inner loop: a test that starts a process (`tgbot run`,
    a browser, `sys.executable -m ...`), in its body or in a fixture it sets up (of any
    scope), must carry `@pytest.mark.slow`, or it fails where it tries. `asyncio`'s
    subprocesses go through `subprocess.Popen` too."""
    del nextitem
    if item.get_closest_marker("slow") is not None:
        return (yield)
    real_init = subprocess.Popen.__init__
    test_name = item.nodeid

    def refuse(self: subprocess.Popen[bytes], args: object, *rest: object, **kw: object) -> None:
        del self, rest, kw
        raise pytest.fail.Exception(
            f"{test_name} starts a process ({args!r}) but is not marked slow: "
            "add @pytest.mark.slow (or a module-level pytestmark) so `-m 'not slow'` stays fast"
        )

    subprocess.Popen.__init__ = refuse  # type: ignore[method-assign]
    try:
        return (yield)
    finally:
        subprocess.Popen.__init__ = real_init  # type: ignore[method-assign]

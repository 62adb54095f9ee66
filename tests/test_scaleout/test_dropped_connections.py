"""A pooled PostgreSQL connection the server dropped between two operations (a restart, an
operator's `pg_terminate_backend`) costs the next operation nothing: with no pre-ping, its
first statement finds the connection gone and runs again on a fresh one
(`storage.reconnect`)."""

from __future__ import annotations

import asyncio

import pytest
import sqlalchemy as sa

from bot.domain.ids import SessionKey
from storage.engine import create_engine_for
from storage.postgres.locks import AdvisoryChatLock
from storage.sql import SqlStore
from tests.test_scaleout.conftest import fresh_postgres

pytestmark = pytest.mark.postgres

CHAT = SessionKey(chat_id=-7001)


async def drop_other_connections(url: str) -> int:
    """Terminate every other backend of the database; how many there were."""
    engine = create_engine_for(url)
    try:
        async with engine.connect() as conn:
            ended = (
                await conn.execute(
                    sa.text(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    )
                )
            ).scalar_one()
        return int(ended)
    finally:
        await engine.dispose()


async def test_a_read_and_a_write_after_the_server_dropped_the_pool_succeed() -> None:
    url = await fresh_postgres()
    store = SqlStore(create_engine_for(url))
    try:
        opened = await store.open_session(CHAT, scene="group")
        assert await drop_other_connections(url) >= 1  # the store's pooled connection
        assert await store.find_session(CHAT) == opened  # a read

        assert await drop_other_connections(url) >= 1
        renamed = await store.open_session(CHAT, scene="group", title="renamed")  # a write
        assert renamed.title == "renamed"
        assert (await store.find_session(CHAT)) == renamed
    finally:
        await store.close()


async def test_a_read_after_a_restart_that_killed_every_pooled_connection_succeeds() -> None:
    """Every connection the store has (the idle ones its jobs keep, and the pool's) is dead
    after a restart: the next job goes through them, each failing at once, to a live one."""
    url = await fresh_postgres()
    store = SqlStore(create_engine_for(url))
    try:
        opened = await store.open_session(CHAT, scene="group")
        gate = asyncio.Event()

        async def read_while_others_read() -> None:
            async with store.engine.connect() as conn:  # holds a pool slot meanwhile
                await conn.execute(sa.text("SELECT 1"))
                await gate.wait()

        holders = [asyncio.create_task(read_while_others_read()) for _ in range(3)]
        reads = asyncio.gather(*(store.find_session(CHAT) for _ in range(6)))
        assert set(await reads) == {opened}
        gate.set()
        await asyncio.gather(*holders)
        assert await drop_other_connections(url) >= 4
        assert await store.find_session(CHAT) == opened
    finally:
        await store.close()


async def test_a_chat_lock_after_the_server_dropped_the_pool_is_held() -> None:
    url = await fresh_postgres()
    lock = AdvisoryChatLock.for_url(url)
    try:
        async with lock.hold(CHAT):
            pass
        assert await drop_other_connections(url) >= 1  # the lock's pooled connection
        async with lock.hold(CHAT), lock.try_hold(CHAT) as other:
            assert not other  # held, on a fresh connection
    finally:
        await lock.aclose()

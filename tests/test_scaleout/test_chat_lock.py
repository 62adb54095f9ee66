"""One ChatLock contract for LocalChatLock and (under PostgreSQL) AdvisoryChatLock.

Each case gets two lock objects standing for two workers: the same LocalChatLock twice, or
two AdvisoryChatLocks with separate engines (separate connections, as in two processes).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import text

from bot.domain.ids import SessionKey
from bot.ports import ChatLock
from bot.services.turn_scheduler import LocalChatLock
from storage.engine import create_engine_for
from storage.postgres.locks import MIGRATION_LOCK_ID, AdvisoryChatLock, advisory_key, chat_key
from tests.deadlines import EVENT, deadline
from tests.test_scaleout.conftest import fresh_postgres

CHAT = SessionKey(chat_id=-100500)
TOPIC = SessionKey(chat_id=-100500, thread_id=7)
OTHER = SessionKey(chat_id=-200)

Workers = tuple[ChatLock, ChatLock]


@pytest.fixture(params=["local", pytest.param("postgres", marks=pytest.mark.postgres)])
async def workers(request: pytest.FixtureRequest) -> AsyncIterator[Workers]:
    if request.param == "local":
        shared = LocalChatLock()
        yield shared, shared
        assert shared.held == 0
        return
    url = await fresh_postgres()
    first, second = AdvisoryChatLock.for_url(url), AdvisoryChatLock.for_url(url)
    try:
        yield first, second
    finally:
        await first.aclose()
        await second.aclose()


async def test_holders_of_one_chat_never_overlap(workers: Workers) -> None:
    inside = 0
    most = 0
    order: list[int] = []

    async def turn(n: int) -> None:
        nonlocal inside, most
        async with workers[n % 2].hold(CHAT):
            inside += 1
            most = max(most, inside)
            await asyncio.sleep(0.005)  # the "work" of a turn; other workers try meanwhile
            order.append(n)
            inside -= 1

    await asyncio.wait_for(asyncio.gather(*(turn(n) for n in range(10))), deadline(EVENT))
    assert most == 1
    assert sorted(order) == list(range(10))


@pytest.mark.parametrize(
    ("key", "scope"),
    [(OTHER, "turn"), (TOPIC, "turn"), (CHAT, "store")],
    ids=["another-chat", "another-topic", "same-chat-store-scope"],
)
async def test_other_chats_and_the_store_scope_are_not_blocked_by_a_turn(
    workers: Workers, key: SessionKey, scope: str
) -> None:
    async with workers[0].hold(CHAT, scope="turn"):
        entered = asyncio.Event()

        async def other() -> None:
            async with workers[1].hold(key, scope=scope):  # type: ignore[arg-type]
                entered.set()

        await asyncio.wait_for(other(), deadline(EVENT))
        assert entered.is_set()


async def test_a_waiter_enters_when_the_holder_leaves(workers: Workers) -> None:
    release = asyncio.Event()
    held = asyncio.Event()
    entered = asyncio.Event()

    async def holder() -> None:
        async with workers[0].hold(CHAT):
            held.set()
            await release.wait()

    async def waiter() -> None:
        await held.wait()
        async with workers[1].hold(CHAT):
            entered.set()

    tasks = [asyncio.create_task(holder()), asyncio.create_task(waiter())]
    await held.wait()
    assert not entered.is_set()
    release.set()
    await asyncio.wait_for(asyncio.gather(*tasks), deadline(EVENT))
    assert entered.is_set()


def test_lock_ids_are_stable_and_distinct() -> None:
    # Every worker (and every version) must compute the same id for a chat.
    assert chat_key(CHAT, "turn") == 1545539173468488027
    assert chat_key(CHAT, "store") == 6106443932543400586
    ids = {
        chat_key(CHAT, "turn"),
        chat_key(CHAT, "store"),
        chat_key(TOPIC, "turn"),
        chat_key(OTHER, "turn"),
        MIGRATION_LOCK_ID,
    }
    assert len(ids) == 5
    assert all(-(2**63) <= i < 2**63 for i in ids)
    assert advisory_key("a", 1) != advisory_key("a1")


async def _advisory_locks(url: str, *, granted: bool) -> int:
    engine = create_engine_for(url)
    try:
        async with engine.connect() as conn:
            query = text(  # this database's: other test workers share the server
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted = :g"
                " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            )
            return int((await conn.execute(query, {"g": granted})).scalar_one())
    finally:
        await engine.dispose()


async def _until(url: str, *, granted: bool, count: int) -> None:
    """PostgreSQL offers no event for "a backend now waits on a lock"; poll pg_locks."""
    async with asyncio.timeout(deadline(EVENT)):
        while await _advisory_locks(url, granted=granted) != count:  # noqa: ASYNC110
            await asyncio.sleep(0.02)


@pytest.mark.postgres
async def test_a_cancelled_wait_leaves_no_advisory_lock_behind(postgres_url: str) -> None:
    first, second = AdvisoryChatLock.for_url(postgres_url), AdvisoryChatLock.for_url(postgres_url)
    try:
        async with first.hold(CHAT):
            waiting = asyncio.create_task(second.hold(CHAT).__aenter__())
            await _until(postgres_url, granted=False, count=1)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            await _until(postgres_url, granted=False, count=0)
        await _until(postgres_url, granted=True, count=0)
        async with asyncio.timeout(5), second.hold(CHAT):
            assert await _advisory_locks(postgres_url, granted=True) == 1
    finally:
        await first.aclose()
        await second.aclose()


async def test_try_hold_takes_a_free_lock_and_never_waits_for_a_held_one(
    workers: Workers,
) -> None:
    """The orphaned-turn scan's test: a chat whose turn another worker holds is busy (no
    waiting); once released, it is free again, and other chats or scopes never were busy."""
    first, second = workers
    async with first.hold(CHAT, scope="turn"):
        async with asyncio.timeout(10):
            async with second.try_hold(CHAT, scope="turn") as held:
                assert held is False
            async with second.try_hold(CHAT, scope="store") as held:
                assert held is True
            async with second.try_hold(OTHER, scope="turn") as held:
                assert held is True
    async with second.try_hold(CHAT, scope="turn") as held:
        assert held is True
        async with first.try_hold(CHAT, scope="turn") as again:
            assert again is False  # held by a try_hold too
    async with first.hold(CHAT, scope="turn"):  # and released by it
        pass


async def test_the_store_lock_tells_whether_another_worker_has_messages_waiting_to_join(
    workers: Workers,
) -> None:
    """`hold_store` says whether a chat's "join" lock is held (by either worker), only for
    that chat and topic, and holds the store lock as `hold(scope="store")` does."""
    first, second = workers
    async with second.hold_store(CHAT) as joining:
        assert joining is False
    # its own join lock, held on the worker's shared connection (where PostgreSQL would grant
    # it again and the peek could not see it), counts too
    async with first.hold(CHAT, scope="join"), first.hold_store(CHAT) as joining:
        assert joining is True
    async with first.hold(CHAT, scope="join"):
        async with second.hold_store(CHAT) as joining:
            assert joining is True
            async with first.try_hold(CHAT, scope="store") as held:
                assert held is False  # it is the store lock
        for key in (TOPIC, OTHER):
            async with second.hold_store(key) as joining:
                assert joining is False
    async with second.hold_store(CHAT) as joining:
        assert joining is False


@pytest.mark.postgres
async def test_free_locks_share_one_connection_and_a_second_holder_waits(postgres_url: str) -> None:
    """Locks nobody holds are taken on the worker's one shared connection (no connection
    per turn); a second holder of one of them in the same worker waits on its own."""
    lock = AdvisoryChatLock.for_url(postgres_url)
    chats = [SessionKey(chat_id=-300 - n) for n in range(5)]
    try:
        async with contextlib.AsyncExitStack() as stack:
            for key in chats:
                await stack.enter_async_context(lock.hold(key))
            assert lock._engine.pool.checkedout() == 1  # type: ignore[attr-defined]
            assert await _advisory_locks(postgres_url, granted=True) == len(chats)
            again = lock.hold(chats[0])
            second = asyncio.create_task(again.__aenter__())
            await _until(postgres_url, granted=False, count=1)  # waits, on a connection
            assert not second.done()
        await asyncio.wait_for(second, deadline(EVENT))  # entered once the first left
        assert await _advisory_locks(postgres_url, granted=True) == 1
        await again.__aexit__(None, None, None)
    finally:
        await lock.aclose()
    await _until(postgres_url, granted=True, count=0)


@pytest.mark.postgres
async def test_locks_asked_at_once_go_together_in_few_round_trips(postgres_url: str) -> None:
    """Turns of forty chats starting and ending at once take and give back their locks in a
    few round trips on the shared connection, not eighty; each is granted and released."""
    lock = AdvisoryChatLock.for_url(postgres_url)
    other = AdvisoryChatLock.for_url(postgres_url)
    chats = [SessionKey(chat_id=-400 - n) for n in range(40)]
    shared = lock._shared
    trips = 0
    answer = shared._answer

    async def counted(batch: Any) -> None:
        nonlocal trips
        trips += 1
        await answer(batch)

    shared._answer = counted  # type: ignore[method-assign]
    entered, leave = asyncio.Semaphore(0), asyncio.Event()

    async def turn(key: SessionKey) -> None:
        async with lock.hold(key):
            entered.release()
            await leave.wait()

    try:
        turns = [asyncio.create_task(turn(key)) for key in chats]
        for _ in chats:
            await asyncio.wait_for(entered.acquire(), deadline(EVENT))
        assert await _advisory_locks(postgres_url, granted=True) == len(chats)
        assert trips <= 3
        async with other.try_hold(chats[0]) as held:
            assert held is False  # held by the first worker
        leave.set()
        await asyncio.wait_for(asyncio.gather(*turns), deadline(EVENT))
        assert trips <= 6
        assert await _advisory_locks(postgres_url, granted=True) == 0
        async with other.try_hold(chats[0]) as held:
            assert held is True
    finally:
        await lock.aclose()
        await other.aclose()

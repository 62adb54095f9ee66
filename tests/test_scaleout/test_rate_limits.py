"""Rate limits shared by the workers of one PostgreSQL database (`storage.rate_limits`):
two stores (two engines, as two workers have) limit a member as one, the owner is exempt on
every worker, and a burst either side of a minute boundary is not twice the limit."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from adapters.llm.scripted import ScriptedModel
from bot.domain.facts import Sender
from bot.ports import LLMResponse
from bot.texts import text
from storage.engine import create_engine_for
from storage.postgres.locks import AdvisoryChatLock
from storage.rate_limits import SqlRateLimits
from storage.sql import SqlStore
from tests.fakes import RecordingMessenger, inbound
from tests.rig import rig_settings, wire_app
from tests.test_scaleout.conftest import fresh_postgres

pytestmark = pytest.mark.postgres

GROUP = -100700
OWNER = 4242
MALLORY = Sender(id=1066, name="Mallory")
BOB = Sender(id=1002, name="Bob")
PER_USER = 10
START = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
async def url() -> str:
    return await fresh_postgres()


@pytest.fixture
async def stores(url: str) -> AsyncIterator[tuple[SqlStore, SqlStore]]:
    pair = (SqlStore(create_engine_for(url)), SqlStore(create_engine_for(url)))
    try:
        yield pair
    finally:
        for store in pair:
            await store.close()


def limits_of(store: SqlStore, clock: list[float], *, per_chat: int = 100) -> SqlRateLimits:
    return SqlRateLimits(store.engine, per_user=PER_USER, per_chat=per_chat, now=lambda: clock[0])


async def test_two_workers_limit_a_member_as_one(stores: tuple[SqlStore, SqlStore]) -> None:
    clock = [1_800_000_030.0]  # half-way through a minute; nothing before it
    a, b = (limits_of(s, clock) for s in stores)
    taken = await asyncio.gather(
        *((a, b)[n % 2].take(user_id=MALLORY.id, chat_id=GROUP) for n in range(40))
    )
    assert sum(taken) == PER_USER
    # the chat counted only Mallory's admitted messages: Bob still gets through on either
    assert await b.take(user_id=BOB.id, chat_id=GROUP)
    assert await a.take(user_id=BOB.id, chat_id=GROUP)
    # one polite refusal per chat a minute, across workers
    assert [await w.warn_once(GROUP) for w in (a, b, a)] == [True, False, False]
    clock[0] += 60
    assert await b.warn_once(GROUP)


async def test_a_burst_either_side_of_a_minute_boundary_is_not_twice_the_limit(
    stores: tuple[SqlStore, SqlStore],
) -> None:
    clock = [1_800_000_059.0]  # the last second of a minute
    a, b = (limits_of(s, clock) for s in stores)
    assert sum([await a.take(user_id=MALLORY.id, chat_id=GROUP) for _ in range(20)]) == PER_USER
    clock[0] += 2  # one second into the next minute: 59 s of the burst are still in the window
    assert sum([await b.take(user_id=MALLORY.id, chat_id=GROUP) for _ in range(20)]) == 1
    clock[0] += 60  # a minute after the burst it has left the window
    assert sum([await a.take(user_id=MALLORY.id, chat_id=GROUP) for _ in range(20)]) == PER_USER


async def test_the_chat_limit_is_shared_too(stores: tuple[SqlStore, SqlStore]) -> None:
    clock = [1_800_000_030.0]
    a, b = (limits_of(s, clock, per_chat=3) for s in stores)
    members = [Sender(id=2000 + n, name=f"M{n}") for n in range(6)]
    taken = [await (a, b)[n % 2].take(user_id=m.id, chat_id=GROUP) for n, m in enumerate(members)]
    assert taken == [True, True, True, False, False, False]


async def test_two_wired_workers_answer_a_member_within_one_limit_and_the_owner_always(
    stores: tuple[SqlStore, SqlStore], url: str, tmp_path: Path
) -> None:
    """Through the app as `tgbot run` wires it (with the advisory chat locks): the table on
    PostgreSQL; a member's 40 mentions alternate between the workers."""
    model = ScriptedModel(default=lambda _request: LLMResponse(text="ok"))
    security = {"user_messages_per_minute": PER_USER, "chat_messages_per_minute": 1000}
    apps, messengers = [], []
    locks = [AdvisoryChatLock.for_url(url) for _ in stores]
    clock = [1_800_000_030.0]  # the wall clock, fixed: no minute boundary inside the test
    for n, store in enumerate(stores):
        messenger = RecordingMessenger(next_id=10_000 * (n + 1))
        settings = rig_settings(tmp_path / f"w{n}", owner_id=OWNER, security=security)
        app = wire_app(settings, store=store, messenger=messenger, model=model, chat_lock=locks[n])
        assert isinstance(app.inbound.gate.limits, SqlRateLimits)
        app.inbound.gate.limits = SqlRateLimits(
            store.engine, per_user=PER_USER, per_chat=1000, now=lambda: clock[0]
        )
        apps.append(app)
        messengers.append(messenger)
    owner = Sender(id=OWNER, name="Olga")
    try:
        for n in range(40):
            # a group each, so every admitted mention has a turn of its own to answer it
            for sender, base in ((MALLORY, GROUP), (owner, GROUP - 1000)):
                message = inbound(
                    chat_id=base - n, message_id=n + 1, text=f"@helper_bot {n}",
                    sender=sender, at=START, mentions_bot=True,
                )  # fmt: skip
                await apps[n % 2].inbound.on_message(message)
        for app in apps:
            await app.inbound.drain()
    finally:
        for app in apps:
            await app.routes.aclose()
        for lock in locks:
            await lock.aclose()
    sent = [m for messenger in messengers for m in messenger.sent]
    answered = {m.chat_id for m in sent if m.text == "ok"}
    assert len([c for c in answered if c > GROUP - 1000]) == PER_USER  # Mallory, on both
    assert len([c for c in answered if c <= GROUP - 1000]) == 40  # the owner: every one
    refused = [m.chat_id for m in sent if m.text == text("en", "rate_limited")]
    assert len(refused) == 40 - PER_USER  # one per chat a minute: each chat refused once

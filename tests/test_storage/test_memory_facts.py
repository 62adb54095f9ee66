"""The memory facts' contract (`bot.store_ports.MemoryFacts`), the same on every backend: in
memory (`testkit.memory_facts`), SQLite and PostgreSQL (`storage.memory_facts`). Facts are
read and deleted only in their own chat; the caps hold, also for two workers adding at once;
a supergroup migration moves a chat's facts; a restart keeps them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.context.memory_block import CHAT_WIDE, MemoryFact
from bot.store_ports import MemoryFacts
from storage.engine import create_engine_for
from storage.memory_facts import SqlMemoryFacts
from testkit.memory_facts import InMemoryMemoryFacts
from tests.test_storage.conftest import BACKENDS, database_url

GROUP = -100123
OTHER_GROUP = -100456
ALICE = 1001
BOB = 1002
AT = datetime(2026, 12, 7, 3, 0, tzinfo=UTC)


class Opened:
    """Facts over one database; `again()` opens them anew, as another process would."""

    def __init__(self, url: str | None) -> None:
        self.url = url
        self.engines: list[AsyncEngine] = []
        self.local = InMemoryMemoryFacts()

    def again(self) -> MemoryFacts:
        if self.url is None:
            return self.local
        engine = create_engine_for(self.url)
        self.engines.append(engine)
        return SqlMemoryFacts(engine)

    async def close(self) -> None:
        for engine in self.engines:
            await engine.dispose()


@pytest.fixture(params=BACKENDS)
async def opened(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opened]:
    url = None if request.param == "memory" else await database_url(request.param, tmp_path)
    opened = Opened(url)
    try:
        yield opened
    finally:
        await opened.close()


async def add(
    facts: MemoryFacts,
    text: str,
    *,
    chat: int = GROUP,
    member: int = ALICE,
    per_member: int = 50,
    per_chat: int = 100,
    minutes: int = 0,
) -> MemoryFact:
    added = await facts.add_fact(
        chat_id=chat,
        member_id=member,
        author_id=member if member != CHAT_WIDE else ALICE,
        text=text,
        created_at=AT + timedelta(minutes=minutes),
        per_member=per_member,
        per_chat=per_chat,
    )
    assert isinstance(added, MemoryFact), added
    return added


async def test_a_fact_is_kept_whole_and_read_back_after_a_restart(opened: Opened) -> None:
    added = await add(opened.again(), "vegetarian; 素食 [not a block]")
    (read,) = await opened.again().facts_of(GROUP, ALICE, limit=10)
    assert read == added
    assert read.text == "vegetarian; 素食 [not a block]"
    assert read.created_at == AT
    assert read.alias == f"f{added.id}"


async def test_facts_of_a_member_are_theirs_and_the_chats_in_that_chat_only(
    opened: Opened,
) -> None:
    facts = opened.again()
    alice_here = await add(facts, "alice here")
    await add(facts, "bob here", member=BOB)
    chat_here = await add(facts, "stand-up at 10", member=CHAT_WIDE)
    await add(facts, "alice elsewhere", chat=OTHER_GROUP)
    await add(facts, "alice privately", chat=ALICE)
    shown = await facts.facts_of(GROUP, ALICE, limit=10)
    assert [f.text for f in shown] == [alice_here.text, chat_here.text]
    assert [f.text for f in await facts.facts_of(GROUP, None, limit=10)] == ["stand-up at 10"]
    assert [f.text for f in await facts.facts_of(ALICE, ALICE, limit=10)] == ["alice privately"]


async def test_facts_are_newest_first_and_limited_per_kind(opened: Opened) -> None:
    facts = opened.again()
    for n in range(4):
        await add(facts, f"mine {n}", minutes=n)
        await add(facts, f"chat {n}", member=CHAT_WIDE, minutes=n)
    shown = await facts.facts_of(GROUP, ALICE, limit=2)
    assert [f.text for f in shown] == ["mine 3", "mine 2", "chat 3", "chat 2"]


async def test_the_caps_per_member_and_per_chat_refuse_and_store_nothing(opened: Opened) -> None:
    facts = opened.again()
    await add(facts, "one", per_member=2)
    await add(facts, "two", per_member=2)
    refused = await facts.add_fact(
        chat_id=GROUP,
        member_id=ALICE,
        author_id=ALICE,
        text="three",
        created_at=AT,
        per_member=2,
        per_chat=100,
    )
    assert refused == "per_member"
    # another chat has its own count
    await add(facts, "elsewhere", chat=OTHER_GROUP, per_member=2)
    full = await facts.add_fact(
        chat_id=GROUP,
        member_id=BOB,
        author_id=BOB,
        text="bob",
        created_at=AT,
        per_member=50,
        per_chat=2,
    )
    assert full == "per_chat"
    assert len(await facts.facts_of(GROUP, ALICE, limit=10)) == 2
    assert await facts.facts_of(GROUP, BOB, limit=10) == ()


async def test_delete_reaches_only_the_named_chat(opened: Opened) -> None:
    facts = opened.again()
    mine = await add(facts, "mine")
    theirs = await add(facts, "in another chat", chat=OTHER_GROUP)
    assert await facts.find_fact(GROUP, theirs.id) is None
    assert await facts.delete_facts(GROUP, [theirs.id]) == 0
    assert await facts.find_fact(OTHER_GROUP, theirs.id) == theirs
    assert await facts.find_fact(GROUP, mine.id) == mine
    assert await facts.delete_facts(GROUP, [mine.id, 999_999]) == 1
    assert await opened.again().find_fact(GROUP, mine.id) is None


async def test_clearing_a_member_leaves_others_and_other_chats(opened: Opened) -> None:
    facts = opened.again()
    await add(facts, "a1")
    await add(facts, "a2")
    await add(facts, "b", member=BOB)
    await add(facts, "chat", member=CHAT_WIDE)
    await add(facts, "a elsewhere", chat=OTHER_GROUP)
    assert await facts.delete_member_facts(GROUP, ALICE) == 2
    assert [f.text for f in await facts.facts_of(GROUP, ALICE, limit=10)] == ["chat"]
    assert [f.text for f in await facts.facts_of(GROUP, BOB, limit=10)] == ["b", "chat"]
    assert [f.text for f in await facts.facts_of(OTHER_GROUP, ALICE, limit=10)] == ["a elsewhere"]


async def test_a_supergroup_migration_moves_the_chats_facts(opened: Opened) -> None:
    facts = opened.again()
    kept = await add(facts, "alice in the old group", chat=-555)
    await add(facts, "old group's", chat=-555, member=CHAT_WIDE)
    await add(facts, "untouched", chat=OTHER_GROUP)
    assert await facts.move_chat_facts(-555, -100555) == 2
    assert await facts.facts_of(-555, ALICE, limit=10) == ()
    moved = await opened.again().facts_of(-100555, ALICE, limit=10)
    assert [(f.id, f.text) for f in moved] == [
        (kept.id, "alice in the old group"),
        (kept.id + 1, "old group's"),
    ]


async def test_the_operators_list_is_by_chat_then_newest(opened: Opened) -> None:
    facts = opened.again()
    await add(facts, "g1")
    await add(facts, "o1", chat=OTHER_GROUP)
    await add(facts, "g2")
    listed = await facts.list_facts(limit=10)
    assert [(f.chat_id, f.text) for f in listed] == [
        (OTHER_GROUP, "o1"),
        (GROUP, "g2"),
        (GROUP, "g1"),
    ]
    mine = await facts.list_facts(chat_id=GROUP, limit=1)
    assert [(f.chat_id, f.text) for f in mine] == [(GROUP, "g2")]


async def test_two_workers_adding_at_once_never_pass_the_cap(opened: Opened) -> None:
    workers = [opened.again(), opened.again()]

    async def one(n: int) -> MemoryFact | str:
        return await workers[n % 2].add_fact(
            chat_id=GROUP,
            member_id=ALICE,
            author_id=ALICE,
            text=f"fact {n}",
            created_at=AT,
            per_member=5,
            per_chat=100,
        )

    results = await asyncio.gather(*(one(n) for n in range(12)))
    assert sum(isinstance(r, MemoryFact) for r in results) == 5
    assert len(await opened.again().facts_of(GROUP, ALICE, limit=50)) == 5

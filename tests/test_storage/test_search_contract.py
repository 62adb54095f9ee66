"""The history-search part of the store contract (`search_messages`) on every backend."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.domain.facts import Sender
from bot.domain.ids import SessionKey
from bot.domain.platform_messages import PlatformMessage
from bot.domain.records import UserRecord
from bot.ports import InboundAppend, NewRecord
from storage.codec import platform_message_row
from storage.engine import create_engine_for
from storage.migrate import alembic_config, upgrade_database
from storage.search import index_tokens
from storage.search_query import MAX_QUERY_CHARS, query_terms
from storage.sql import SqlStore
from storage.tables import PLATFORM_MESSAGES
from tests.test_storage.conftest import Store, database_url

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
CHAT = -1001234567890123
OTHER = -1009999999999999
TOPIC = 2**40
ALICE = Sender(id=7_000_000_001, name="Alice", username="alice")


def said(
    message_id: int, text: str, *, chat: int = CHAT, thread: int = 0, minutes: int = 0
) -> PlatformMessage:
    return PlatformMessage(
        chat_id=chat,
        thread_id=thread,
        message_id=message_id,
        sender_id=ALICE.id,
        sender_name=ALICE.name,
        date=T0 + timedelta(minutes=minutes),
        text=text,
    )


async def search(
    store: Store, query: str, *, chat: int = CHAT, thread: int = 0, limit: int = 5
) -> list[int]:
    hits = await store.search_messages(chat, thread, query, limit=limit)
    return [hit.message_id for hit in hits]


async def test_finds_english_and_chinese_words_best_match_first(store: Store) -> None:
    await store.record_platform_messages(
        [
            said(1, "the wifi password is hunter2", minutes=1),
            said(2, "wifi is down again", minutes=2),
            said(3, "lunch at noon?", minutes=3),
            said(4, "无线网密码是 abc12345", minutes=4),
            said(5, "密码忘了", minutes=5),
            said(6, "今天中午吃什么", minutes=6),
        ]
    )
    assert await search(store, "wifi password") == [1, 2]  # both words beat one word
    assert await search(store, "WiFi") == [2, 1]  # one word each: newest first
    assert await search(store, "pass") == [1]  # a word matches as a prefix
    assert await search(store, "密码") == [5, 4]  # a two-character word
    assert await search(store, "无线网密码") == [4, 5]
    assert await search(store, "中午") == [6]
    assert await search(store, "码") == [5, 4]  # one character: a substring
    assert await search(store, "dinner") == []


async def test_never_another_chat_or_thread(store: Store) -> None:
    await store.record_platform_messages(
        [
            said(1, "secret plan alpha"),
            said(1, "secret plan beta", chat=OTHER),
            said(2, "secret plan gamma", thread=TOPIC),
        ]
    )
    assert await search(store, "secret plan") == [1]
    (hit,) = await store.search_messages(CHAT, 0, "secret", limit=5)
    assert hit.text == "secret plan alpha"
    (hit,) = await store.search_messages(OTHER, 0, "secret", limit=5)
    assert hit.text == "secret plan beta"
    assert await search(store, "gamma") == []
    assert await search(store, "gamma", thread=TOPIC) == [2]


async def test_an_edit_is_found_by_its_newest_words_only(store: Store) -> None:
    await store.record_platform_messages([said(1, "meet at the station")])
    await store.record_platform_messages(
        [
            PlatformMessage(
                **{**_fields(said(1, "meet at the airport")), "edited_at": T0 + timedelta(hours=1)}
            )
        ]
    )
    assert await search(store, "station") == []
    assert await search(store, "airport") == [1]


def _fields(message: PlatformMessage) -> dict[str, object]:
    return {name: getattr(message, name) for name in message.__dataclass_fields__}


async def test_inbound_batches_and_appended_records_are_indexed(store: Store) -> None:
    session = await store.open_session(SessionKey(chat_id=CHAT), scene="group")
    items = [
        InboundAppend(
            session_id=session.id,
            record=NewRecord(
                body=UserRecord(sender=ALICE, text=body), created_at=T0, message_ids=(n,), tokens=3
            ),
            platform_message=said(n, body, minutes=n),
        )
        for n, body in [(10, "the door code is 4711"), (11, "门禁密码 4711")]
    ]
    await store.append_inbound(items)
    await store.append(
        session.id,
        [NewRecord(body=UserRecord(sender=ALICE, text="x"), created_at=T0, message_ids=(12,))],
        platform_messages=[said(12, "door opens at nine", minutes=12)],
    )
    assert await search(store, "door") == [12, 10]
    assert await search(store, "4711") == [11, 10]
    assert await search(store, "密码") == [11]


async def test_pruned_messages_leave_the_index(store: Store) -> None:
    await store.record_platform_messages(
        [said(1, "old invoice number 77", minutes=-60 * 24 * 40), said(2, "new invoice")]
    )
    await store.prune(T0 - timedelta(days=30))
    assert await search(store, "invoice") == [2]


async def test_limit_and_messages_without_words(store: Store) -> None:
    await store.record_platform_messages(
        [said(n, f"report {n}", minutes=n) for n in range(1, 9)] + [said(20, "")]
    )
    assert await search(store, "report", limit=3) == [8, 7, 6]
    assert await search(store, "report", limit=0) == []


HOSTILE = [
    '"',
    "'",
    'wifi"password',
    "NEAR(wifi password, 2)",
    "wifi AND password OR NOT lunch",
    "body:wifi",
    "scope:c1t0",
    "pass* -wifi +lunch ^x",
    "(((",
    ")",
    "{scope body}: x",
    "？！。，、……",
    "!!!",
    "\\",
    "%_%",
    "'; DROP TABLE platform_events; --",
    "\x00",
    "a" * 10_000,
    "密" * 10_000,
    "",
    "   ",
]


@pytest.mark.parametrize("query", HOSTILE, ids=range(len(HOSTILE)))
async def test_hostile_queries_are_plain_words(store: Store, query: str) -> None:
    await store.record_platform_messages([said(1, "the wifi password is hunter2")])
    found = await search(store, query)
    terms = query_terms(query)
    if any(t.text in ("wifi", "password") for t in terms):
        assert found == [1]
    if not terms:
        assert found == []
    assert await search(store, "wifi") == [1]  # the store still works


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(query=st.text(min_size=0, max_size=400))
async def test_any_text_is_a_query(store: Store, query: str) -> None:
    await store.record_platform_messages([said(1, "hello world 你好世界")])
    hits = await store.search_messages(CHAT, 0, query, limit=5)
    assert len(hits) <= 1


_STORABLE = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
_CHATS = iter(range(-1002000000000, -1001000000000))


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(body=st.text(alphabet=_STORABLE, max_size=400))
async def test_any_text_is_stored_and_found_by_its_own_words(store: Store, body: str) -> None:
    chat = next(_CHATS)  # a chat of its own per example
    await store.record_platform_messages([said(1, body, chat=chat)])
    found = await search(store, body, chat=chat)
    assert found == ([1] if query_terms(body) else [])


async def test_a_pile_of_combining_marks_is_stored_and_found(store: Store) -> None:
    zalgo = "密" + "\u0301" * 5_000 + "码" + "\u0302" * 5_000 + " e" + "\u0303" * 5_000
    await store.record_platform_messages([said(1, zalgo)])
    assert await search(store, zalgo) == [1]
    assert await search(store, "密") == [1]


@given(text=st.text(max_size=300))
def test_a_message_is_found_by_any_of_its_own_words(text: str) -> None:
    """The tokenizer contract every store shares: each query term of a text is a term the
    text is indexed under (or a prefix of one)."""
    tokens = set(index_tokens(text))
    for term in query_terms(text):
        assert term.text in tokens or (term.prefix and any(t.startswith(term.text) for t in tokens))


def test_a_huge_query_is_cut() -> None:
    assert query_terms("x " * MAX_QUERY_CHARS + "tail") == query_terms("x " * MAX_QUERY_CHARS)
    assert not any(t.text == "tail" for t in query_terms("x " * MAX_QUERY_CHARS + "tail"))


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
async def test_the_migration_indexes_what_is_already_stored(backend: str, tmp_path: Path) -> None:
    url = await database_url(backend, tmp_path)
    engine = create_engine_for(url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(lambda sync: _downgrade_to(sync, "0002"))
            rows = [said(1, "the wifi password is hunter2"), said(2, "密码在冰箱上")]
            values = [platform_message_row(e, default_record_id=None) for e in rows]
            await conn.execute(PLATFORM_MESSAGES.insert(), values)
    finally:
        await engine.dispose()
    await upgrade_database(url)
    store = SqlStore(create_engine_for(url))
    try:
        assert await search(store, "hunter2") == [1]
        assert await search(store, "冰箱") == [2]
    finally:
        await store.close()


def _downgrade_to(connection: Any, revision: str) -> None:
    config = alembic_config()
    config.attributes["connection"] = connection
    command.downgrade(config, revision)

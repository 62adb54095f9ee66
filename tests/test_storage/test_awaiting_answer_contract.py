"""`sessions_awaiting_answer`: the one query of the orphaned-turn scan, on every backend.

A session is listed when its active leaf is a member message or tool results stored at or
after `since`, and the bot is still in the chat; a session whose leaf is a reply, an
event or a summary, or whose trigger is older, or that has no records, is not.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.domain.facts import Sender
from bot.domain.ids import SessionKey
from bot.domain.messages import ToolCall
from bot.domain.records import (
    AssistantRecord,
    RecordBody,
    ServiceMessageRecord,
    ToolResult,
    ToolResultsRecord,
    UserRecord,
)
from bot.ports import NewRecord
from tests.test_storage.conftest import Store

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SINCE = T0 - timedelta(minutes=10)
ALICE = Sender(id=7_000_000_001, name="Alice")
ASKED = UserRecord(sender=ALICE, text="ping")
CALLED = AssistantRecord(text="", tool_calls=(ToolCall(id="c1", name="f", arguments="{}"),))
RESULTS = ToolResultsRecord(results=(ToolResult(call_id="c1", name="f", content="ok"),))


async def chat(store: Store, chat_id: int, *bodies: RecordBody, at: datetime = T0) -> int:
    """A session of `chat_id` (a 64-bit id, thread 0) whose path is `bodies`."""
    session = await store.open_session(SessionKey(chat_id=chat_id), scene="private")
    if bodies:
        await store.append(session.id, [NewRecord(body=b, created_at=at) for b in bodies])
    return session.id


async def test_lists_open_sessions_whose_leaf_awaits_an_answer_since(store: Store) -> None:
    asked = await chat(store, 2**40 + 1, ASKED)
    mid_tools = await chat(store, 2**40 + 2, ASKED, CALLED, RESULTS)
    just_in_time = await chat(store, 2**40 + 3, ASKED, at=SINCE)
    await chat(store, 2**40 + 4, ASKED, AssistantRecord(text="pong"))  # answered
    await chat(store, 2**40 + 5, ASKED, CALLED)  # a tool call without its results
    await chat(store, 2**40 + 6, ServiceMessageRecord(text="Bob joined"))
    await chat(store, 2**40 + 7, ASKED, at=SINCE - timedelta(seconds=1))  # too old
    await chat(store, 2**40 + 8)  # nothing stored yet
    await chat(store, 2**40 + 9, ASKED)
    assert await store.set_chat_closed(2**40 + 9, True) == 1  # the bot was removed

    found = await store.sessions_awaiting_answer(SINCE)

    assert [s.id for s in found] == [asked, mid_tools, just_in_time]
    assert found[0] == await store.find_session(SessionKey(chat_id=2**40 + 1))


async def test_a_session_leaves_the_list_once_answered(store: Store) -> None:
    sid = await chat(store, 77, ASKED)
    assert [s.id for s in await store.sessions_awaiting_answer(SINCE)] == [sid]
    await store.append(sid, [NewRecord(body=AssistantRecord(text="pong"), created_at=T0)])
    assert await store.sessions_awaiting_answer(SINCE) == ()

"""expand_tool_result: an earlier tool result of this conversation, whole (up to a cap)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.domain.facts import Sender
from bot.domain.records import StoredRecord, ToolResult, ToolResultsRecord, UserRecord
from bot.errors import ToolError
from bot.tools.base import ToolContext
from bot.tools.expand_tool_result import MAX_CHARS, TOOL, expand_tool_result
from testkit.memory_store import InMemoryStore
from tests.fakes import RecordingMessenger, SteppingClock

AT = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def results(record_id: int, *pairs: tuple[str, str]) -> StoredRecord:
    return StoredRecord(
        id=record_id,
        session_id=1,
        parent_id=record_id - 1 or None,
        created_at=AT,
        body=ToolResultsRecord(
            results=tuple(ToolResult(call_id=c, name="search_notes", content=t) for c, t in pairs)
        ),
    )


def context(*records: StoredRecord) -> ToolContext:
    return ToolContext(
        chat_id=-100500,
        thread_id=0,
        bot_id=999,
        clock=SteppingClock(AT),
        messenger=RecordingMessenger(),
        platform_messages=InMemoryStore(),
        records=records,
    )


async def test_it_returns_the_named_result_whole() -> None:
    long = "x" * 5_000
    ctx = context(results(1, ("call_a", "short"), ("call_b", long)), results(2, ("call_c", "c")))

    assert await expand_tool_result({"tool_call_id": "call_b"}, ctx) == long
    assert await expand_tool_result({"tool_call_id": "call_a"}, ctx) == "short"


async def test_the_newest_result_of_a_reused_call_id_wins() -> None:
    ctx = context(results(1, ("call_1", "old")), results(2, ("call_1", "new")))

    assert await expand_tool_result({"tool_call_id": "call_1"}, ctx) == "new"


async def test_a_result_over_the_cap_is_cut_and_says_how_much_is_left_out() -> None:
    ctx = context(results(1, ("call_1", "a" * MAX_CHARS + "b" * 123)))

    out = await expand_tool_result({"tool_call_id": "call_1"}, ctx)

    assert out == "a" * MAX_CHARS + "\n[... 123 characters more ...]"


async def test_an_unknown_id_is_a_not_found_error_naming_it() -> None:
    user = StoredRecord(
        id=1,
        session_id=1,
        parent_id=None,
        created_at=AT,
        body=UserRecord(sender=Sender(id=1, name="Alice"), text="call_9"),
    )
    ctx = context(user, results(2, ("call_1", "one")))

    with pytest.raises(ToolError, match="call_9") as raised:
        await expand_tool_result({"tool_call_id": "call_9"}, ctx)
    assert raised.value.code == "not_found"


@pytest.mark.parametrize("args", [{}, {"tool_call_id": 7}, {"tool_call_id": "c" * 201}])
async def test_a_missing_or_bad_id_is_refused(args: dict[str, object]) -> None:
    with pytest.raises(ToolError):
        await expand_tool_result(args, context(results(1, ("call_1", "one"))))


def test_its_schema_asks_for_the_call_id() -> None:
    assert TOOL.spec.name == "expand_tool_result"
    assert TOOL.spec.parameters["required"] == ["tool_call_id"]

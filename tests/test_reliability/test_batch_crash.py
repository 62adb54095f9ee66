"""A whole `getUpdates` batch is stored in one transaction and confirmed only after it
commits. Killed (SIGKILL) between the commit and the confirmation, a real `tgbot run`
process sees the same batch again after a restart: nothing is lost, nothing doubled, and
the one message that asked for an answer is answered once.

The kill comes from the test entry point `tests/crash_after_batch.py`: `tgbot run` with an
`after_batch` hook that SIGKILLs the process."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bot.domain.records import AssistantRecord, UserRecord
from bot.ports import LLMRequest, LLMResponse
from storage.sql import SqlStore
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer
from tests.bot_process import BotProcess, eventually
from tests.test_reliability.conftest import GatedModel, path_of

pytestmark = pytest.mark.slow

GROUPS = [-100500 - n for n in range(4)]
DANA_ID = 5201
DANA: dict[str, Any] = {"id": DANA_ID, "first_name": "Dana"}
MEMBERS: list[dict[str, Any]] = [{"id": 5300 + n, "first_name": f"Member{n}"} for n in range(3)]


def hello(request: LLMRequest) -> LLMResponse:
    return LLMResponse(text="Hello Dana!")


async def user_texts(db: SqlStore, chat_id: int) -> list[str]:
    return [r.body.text for r in await path_of(db, chat_id) if isinstance(r.body, UserRecord)]


async def test_a_kill_between_a_batch_commit_and_its_confirmation_loses_and_doubles_nothing(
    bot: BotProcess, api: FakeBotApi, llm: FakeOpenAIServer, db: SqlStore
) -> None:
    llm.model = GatedModel(hello)
    expected: dict[int, list[str]] = {group: [] for group in GROUPS}
    for n in range(12):  # one batch of 49 updates, chats interleaved
        for g, group in enumerate(GROUPS):
            text = f"group {g} message {n}"
            api.push_update(api.user_message(group, MEMBERS[(n + g) % 3], text))
            expected[group].append(text)
    last = api.push_update(api.user_message(DANA_ID, DANA, "hello?", chat_type="private"))

    await bot.start(entry="tests.crash_after_batch")
    assert bot.process is not None
    assert await asyncio.to_thread(bot.process.wait, 30) == -9  # SIGKILL, by the fault
    # the batch was committed ...
    for group in GROUPS:
        assert await user_texts(db, group) == expected[group]
    assert await user_texts(db, DANA_ID) == ["hello?"]
    # ... and never confirmed: Telegram would deliver it again
    assert all(int(call.get("offset") or 0) <= last for call in api.calls_of("getUpdates"))
    assert "killing the process before the offset is confirmed" in bot.log()

    await bot.start()  # the same batch again, then new messages
    for g, group in enumerate(GROUPS):
        text = f"group {g} after the restart"
        api.push_update(api.user_message(group, MEMBERS[g % 3], text))
        expected[group].append(text)

    async def all_stored() -> bool:
        return all([await user_texts(db, group) == expected[group] for group in GROUPS])

    await eventually(all_stored)
    await eventually(lambda: _answered(api))
    assert await bot.stop() == 0

    for group in GROUPS:  # each message once, in order
        assert await user_texts(db, group) == expected[group]
    dana = await path_of(db, DANA_ID)
    assert [type(r.body) for r in dana] == [UserRecord, AssistantRecord]
    assert [m["text"] for m in api.sent_messages(DANA_ID)] == ["Hello Dana!"]
    assert len(llm.model.requests) == 1


async def _answered(api: FakeBotApi) -> bool:
    return len(api.sent_messages(DANA_ID)) >= 1

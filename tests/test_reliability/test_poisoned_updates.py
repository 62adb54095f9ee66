"""One update aiogram cannot validate (an older or newer Bot API shape) must not silence the
bot: through a real `tgbot run` process polling the fake Bot API over HTTP, the poisoned
update is logged with its id and reason, recorded in the update log and passed; the
messages around it, in its batch and after it, are answered."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.ports import LLMRequest, LLMResponse
from bot.services.error_log import read_errors
from storage.sql import SqlStore
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer
from tests.bot_process import BotProcess, eventually
from tests.test_reliability.conftest import GatedModel

pytestmark = pytest.mark.slow

ANN_ID, BEN_ID = 5101, 5102
ANN: dict[str, Any] = {"id": ANN_ID, "first_name": "Ann"}
BEN: dict[str, Any] = {"id": BEN_ID, "first_name": "Ben"}


def hello(request: LLMRequest) -> LLMResponse:
    return LLMResponse(text="Hello!")


def replied_to(api: FakeBotApi, chat_id: int) -> list[str]:
    """The texts of the messages the bot's replies in `chat_id` answer."""
    return [m["reply_to_message"].get("text", "") for m in api.sent_messages(chat_id)]


def old_sticker(api: FakeBotApi, chat_id: int) -> dict[str, Any]:
    """A message whose chat comes in a shape nothing reads (no type): one fact in an older
    shape is read leniently (`adapters.telegram.lenient`), the message itself is not."""
    update = api.user_message(chat_id, chat_id, "", chat_type="private")
    del update["message"]["text"]
    update["message"]["sticker"] = {"file_id": "CAADAgADQAADyIsGAAE7MpzFPFQX5QI"}
    chat = update["message"]["chat"]  # a copy: the fake API keeps the chat for later messages
    update["message"]["chat"] = {key: value for key, value in chat.items() if key != "type"}
    return update


def new_forward(api: FakeBotApi, chat_id: int) -> dict[str, Any]:
    """A forward of a type added after our aiogram build, at a date nothing reads."""
    update = api.user_message(chat_id, chat_id, "look at this", chat_type="private")
    update["message"]["forward_origin"] = {"type": "story_repost", "date": 1764500000}
    update["message"]["date"] = "yesterday"
    return update


async def test_a_poisoned_update_is_skipped_and_the_chats_are_answered(
    bot: BotProcess, api: FakeBotApi, llm: FakeOpenAIServer, db: SqlStore
) -> None:
    llm.model = GatedModel(hello)
    await bot.start()
    # one batch: a good message, two poisoned ones, a good message in another chat
    api.push_update(api.user_message(ANN_ID, ANN, "first", chat_type="private"))
    sticker = api.push_update(old_sticker(api, ANN_ID))
    forward = api.push_update(new_forward(api, BEN_ID))
    api.push_update(api.user_message(BEN_ID, BEN, "second", chat_type="private"))

    async def answered(chat_id: int, count: int) -> bool:
        return len(api.sent_messages(chat_id)) >= count

    await eventually(lambda: answered(ANN_ID, 1))
    await eventually(lambda: answered(BEN_ID, 1))
    # the next batch is answered too: polling moved past the poisoned updates
    last = api.push_update(api.user_message(ANN_ID, ANN, "third", chat_type="private"))
    await eventually(lambda: answered(ANN_ID, 2))
    assert replied_to(api, ANN_ID) == ["first", "third"]
    assert replied_to(api, BEN_ID) == ["second"]
    assert await bot.stop() == 0

    log = bot.log()
    assert f"skipping update {sticker} that does not validate: message.chat" in log
    assert f"skipping update {forward} that does not validate: message.date" in log
    offsets = [int(call.get("offset") or 0) for call in api.calls_of("getUpdates")]
    assert max(offsets) == last + 1
    # recorded in the update log: a redelivery would be known
    assert not await db.claim_update(sticker)
    assert not await db.claim_update(forward)
    # and in the error log, for the dashboard's error list
    today = datetime.now(UTC).date()
    days = [today - timedelta(days=1), today, today + timedelta(days=1)]  # any zone
    logged = {e.update_id: e for e in read_errors(bot.data_dir / "agent-traces", days)}
    assert set(logged) == {sticker, forward}
    assert logged[sticker].kind == "skipped_update"
    assert logged[sticker].reason.startswith("message.chat")

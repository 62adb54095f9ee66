"""Reminders and scheduled posts end to end: `tgbot run` against the fake Bot API, with a
scripted model that calls `schedule`. A post set a few seconds ahead (Asia/Shanghai local
time) is sent once at that time with no model call, recorded delivered with Telegram's
message id and stored as the bot's message; bad input is a tool error and stores nothing;
a restart after the due time sends it once, marked late; beyond the grace it is missed and
its creator told; a 403 is failed (never delivered), a 429 is waited out and sent once; a
repeating post is sent once per period."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from adapters.llm.openai_server_wire import from_request
from adapters.llm.scripted import CallTool, Reply, ScriptedModel
from bot.domain.ids import SessionKey
from bot.domain.jobs import JobRun
from bot.domain.records import AssistantRecord
from bot.ports import LLMRequest, LLMResponse
from storage.jobs import SqlJobStore
from tests.bot_process import QUIET_CONFIG, ScriptedBot, StartBot, eventually, reply_stored
from tests.deadlines import EVENT, deadline

pytestmark = pytest.mark.slow

SHANGHAI = ZoneInfo("Asia/Shanghai")
CHAT = -1001234567890
ALICE = {"id": 1001, "first_name": "Alice"}
OWNER = 42
CONFIG = QUIET_CONFIG + "\n[jobs]\nlate_after_seconds = 2\n"


def answer(request: LLMRequest) -> LLMResponse:
    return LLMResponse(text="ok")


def local_iso(seconds_ahead: float) -> str:
    """A Shanghai wall-clock time without an offset (the chat's time zone resolves it)."""
    when = datetime.now(SHANGHAI) + timedelta(seconds=seconds_ahead)
    return when.replace(tzinfo=None).isoformat(timespec="seconds")


async def ask(bot: ScriptedBot, model: ScriptedModel, text: str, *steps: object) -> None:
    """One mention in the group that the bot answers (the steps script the model)."""
    model.add(*steps)  # type: ignore[arg-type]
    replies = len(bot.api.sent_messages(CHAT)) + 1
    bot.api.push_update(bot.api.user_message(CHAT, ALICE, f"@test_bot {text}"))
    await reply_stored(bot.api, bot.store, CHAT, replies)


def tool_result(bot: ScriptedBot) -> dict[str, object]:
    """The last tool result the model read."""
    messages = from_request(bot.llm.requests[-1]).messages
    (result,) = [m for m in messages if m.role == "tool"][-1:]
    loaded = json.loads(result.content)
    assert isinstance(loaded, dict)
    return loaded


async def runs_of(bot: ScriptedBot) -> tuple[JobRun, ...]:
    return await SqlJobStore(bot.store.engine).runs()


async def start(bot_running: StartBot, **settings: str) -> tuple[ScriptedBot, ScriptedModel]:
    model = ScriptedModel(default=answer)
    bot = await bot_running(
        model, config=CONFIG, BOT_TIMEZONE="Asia/Shanghai", BOT_LOCALE="en", **settings
    )
    return bot, model


async def test_a_post_is_sent_once_at_its_local_time_with_no_model_call(
    bot_running: StartBot,
) -> None:
    bot, model = await start(bot_running)
    at = local_iso(3)
    await ask(
        bot,
        model,
        "remind us in a moment",
        CallTool("schedule", {"at": at, "text": "Stand-up time!"}),
        Reply("Set."),
    )
    result = tool_result(bot)
    assert result["job"] == "j1"
    assert result["at"] == f"{at[:10]} {at[11:16]} (Asia/Shanghai)"
    calls = len(bot.llm.requests)
    due = datetime.fromisoformat(at).replace(tzinfo=SHANGHAI).timestamp()

    (_, post) = await bot.api.wait_for_sent(CHAT, 2, timeout=deadline(EVENT))
    assert post["text"] == "Stand-up time!"
    assert int(post["date"]) >= due  # Telegram's date of the message: at its time, not before

    async def recorded() -> bool:
        return any(run.status == "delivered" for run in await runs_of(bot))

    await eventually(recorded)
    (run,) = await runs_of(bot)
    assert (run.message_id, run.late) == (post["message_id"], False)
    assert len(bot.llm.requests) == calls  # a post makes no model call

    # stored as the bot's message: the model sees it in the next turn's history
    session = await bot.store.find_session(SessionKey(chat_id=CHAT))
    assert session is not None
    history = await bot.store.load_history(session.id, max_records=50)
    assert any(
        isinstance(r.body, AssistantRecord) and r.body.text == "Stand-up time!"
        for r in history.records
    )
    await asyncio.sleep(1)  # ten more polls: nothing more is sent
    assert len(bot.api.sent_messages(CHAT)) == 2


BAD_INPUT: list[tuple[dict[str, object], str]] = [
    ({"at": "next tuesday-ish", "text": "x"}, "cannot read the time"),
    ({"at": "2020-01-01T09:00", "text": "x"}, "in the past"),
    ({"at": "2099-01-01T09:00", "text": "x"}, "days ahead"),
    ({"at": "+10", "text": "x", "repeat": "61 * * * *"}, "invalid cron"),
    ({"at": "+10", "text": "x", "repeat": "fortnightly"}, "unknown repeat"),
    ({"at": "+10", "text": "x", "repeat": "*/5 * * * *"}, "members may repeat"),
    ({"at": "+10", "text": "x", "reference": "m999"}, "m999"),
    ({"at": "+10", "text": "x", "chat": -100777}, "not allowed"),
]


async def test_bad_input_is_a_tool_error_and_nothing_is_stored(bot_running: StartBot) -> None:
    bot, model = await start(bot_running)
    for arguments, says in BAD_INPUT:
        if arguments["at"] == "+10":
            arguments = {**arguments, "at": local_iso(600)}
        await ask(bot, model, "schedule it", CallTool("schedule", arguments), Reply("No."))
        messages = from_request(bot.llm.requests[-1]).messages
        result = [m for m in messages if m.role == "tool"][-1]
        assert says in result.content, (arguments, result.content)
    assert await runs_of(bot) == ()


async def sent_to(bot: ScriptedBot, chat_id: int, words: str) -> list[str]:
    return [m["text"] for m in bot.api.sent_messages(chat_id) if words in m["text"]]


async def down_past(bot: ScriptedBot, at: str, seconds: float) -> None:
    """SIGKILL the bot (before `at`) and wait until `seconds` after `at` has passed."""
    bot.bot.kill()
    due = datetime.fromisoformat(at).replace(tzinfo=SHANGHAI).timestamp()
    # the wall clock must pass the due time while the bot is down
    await asyncio.sleep(max(0.0, due + seconds - datetime.now(SHANGHAI).timestamp()))


async def test_a_restart_sends_a_missed_post_late_once_and_beyond_the_grace_records_it_missed(
    bot_running: StartBot,
) -> None:
    bot, model = await start(bot_running)
    # beyond the grace (1 s here): not sent, recorded missed, its creator told
    first = local_iso(4)
    await ask(
        bot,
        model,
        "remind",
        CallTool("schedule", {"at": first, "text": "Early one"}),
        Reply("Set."),
    )
    await down_past(bot, first, 3)
    await bot.bot.start(JOBS__MISFIRE_GRACE_SECONDS="1")

    async def told() -> bool:
        return bool(await sent_to(bot, ALICE["id"], "was missed"))

    await eventually(told)
    (notice,) = await sent_to(bot, ALICE["id"], "was missed")
    assert "j1" in notice
    assert "Early one" in notice
    (missed,) = await runs_of(bot)
    assert (missed.status, missed.message_id) == ("missed", None)

    # within the grace (the default hour): sent once after the restart, saying it is late
    second = local_iso(4)
    sent_before = len(bot.api.sent_messages(CHAT))
    await ask(
        bot,
        model,
        "again",
        CallTool("schedule", {"at": second, "text": "Later one"}),
        Reply("Set."),
    )
    await down_past(bot, second, 3)
    await bot.bot.start()
    (late,) = (await bot.api.wait_for_sent(CHAT, sent_before + 2, timeout=deadline(EVENT)))[-1:]
    assert late["text"].startswith("(Late: this was due at")
    assert late["text"].endswith("Later one")

    async def recorded() -> bool:
        return any(run.status == "delivered" for run in await runs_of(bot))

    await eventually(recorded)
    (delivered,) = [run for run in await runs_of(bot) if run.job_id == 2]
    assert (delivered.message_id, delivered.late) == (late["message_id"], True)
    await asyncio.sleep(1)
    texts = [m["text"] for m in bot.api.sent_messages(CHAT)]
    assert texts.count(late["text"]) == 1
    assert not [t for t in texts if "Early one" in t]


async def test_a_403_is_failed_never_delivered_and_a_429_is_waited_out_and_sent_once(
    bot_running: StartBot,
) -> None:
    bot, model = await start(bot_running)
    await ask(
        bot,
        model,
        "remind us",
        CallTool("schedule", {"at": local_iso(3), "text": "Refused one"}),
        Reply("Set."),
    )
    kicked = "Forbidden: bot was kicked from the supergroup chat"
    bot.api.fail_next("sendMessage", error_code=403, description=kicked)

    async def failed() -> bool:
        return any(run.status == "failed" for run in await runs_of(bot))

    await eventually(failed)
    (run,) = await runs_of(bot)
    assert run.message_id is None
    assert run.error is not None
    assert "bot was kicked" in run.error

    async def told() -> bool:
        return bool(await sent_to(bot, ALICE["id"], "could not be delivered"))

    await eventually(told)
    (notice,) = await sent_to(bot, ALICE["id"], "could not be delivered")
    assert "bot was kicked" in notice

    # Telegram asks the bot to wait, twice (the sender's own retry, then the run's)
    await ask(
        bot,
        model,
        "again",
        CallTool("schedule", {"at": local_iso(3), "text": "Paced one"}),
        Reply("Set."),
    )
    bot.api.fail_next(
        "sendMessage",
        error_code=429,
        description="Too Many Requests: retry after 1",
        retry_after=1,
        times=2,
    )

    async def delivered() -> bool:
        return any(run.status == "delivered" for run in await runs_of(bot))

    await eventually(delivered)
    paced = [run for run in await runs_of(bot) if run.job_id == 2]
    texts = [m["text"] for m in bot.api.sent_messages(CHAT)]
    assert texts.count("Paced one") == 1, texts
    (sent,) = [m for m in bot.api.sent_messages(CHAT) if m["text"] == "Paced one"]
    assert [(r.status, r.message_id) for r in paced] == [("delivered", sent["message_id"])]
    assert paced[0].attempts == 2


BOB = {"id": 1002, "first_name": "Bob"}


async def test_cancel_rights_and_slash_jobs_in_the_askers_language(bot_running: StartBot) -> None:
    bot, model = await start(bot_running)
    at = local_iso(8)
    await ask(
        bot, model, "remind", CallTool("schedule", {"at": at, "text": "Never sent"}), Reply("Set.")
    )
    # Bob, neither its creator nor an administrator: refused, the job stays
    model.add(CallTool("cancel_scheduled", {"job": "j1"}), Reply("Cannot."))
    replies = len(bot.api.sent_messages(CHAT)) + 1
    bot.api.push_update(bot.api.user_message(CHAT, BOB, "@test_bot cancel j1"))
    await reply_stored(bot.api, bot.store, CHAT, replies)
    refused = [m for m in from_request(bot.llm.requests[-1]).messages if m.role == "tool"][-1]
    assert "not allowed" in refused.content
    # `/jobs` lists it; Alice cancels her own with `/jobs cancel j1`
    bot.api.push_update(bot.api.user_message(CHAT, ALICE, "/jobs"))
    listed = (await bot.api.wait_for_sent(CHAT, replies + 1, timeout=deadline(EVENT)))[-1]
    assert listed["text"].startswith("Scheduled jobs:")
    assert "j1 · " in listed["text"]
    assert "by Alice: Never sent" in listed["text"]
    bot.api.push_update(bot.api.user_message(CHAT, ALICE, "/jobs cancel j1"))
    done = (await bot.api.wait_for_sent(CHAT, replies + 2, timeout=deadline(EVENT)))[-1]
    assert done["text"] == "Cancelled j1."
    due = datetime.fromisoformat(at).replace(tzinfo=SHANGHAI).timestamp()
    await asyncio.sleep(max(0.0, due + 1 - datetime.now(SHANGHAI).timestamp()))
    assert not [m for m in bot.api.sent_messages(CHAT) if m["text"] == "Never sent"]
    assert await runs_of(bot) == ()  # the pending run was dropped with the job


async def test_a_repeating_post_is_sent_once_per_period(bot_running: StartBot) -> None:
    """The owner's every-minute post (members may not repeat that often): one message per
    minute, each its own delivered run with Telegram's message id, whatever the job poll
    (every 0.1 s here) sees in between."""
    bot, model = await start(bot_running)
    owner = {"id": OWNER, "first_name": "Owner"}
    model.add(
        CallTool("schedule", {"at": local_iso(2), "text": "Tick", "repeat": "* * * * *"}),
        Reply("Set."),
    )
    replies = len(bot.api.sent_messages(CHAT)) + 1
    bot.api.push_update(bot.api.user_message(CHAT, owner, "@test_bot tick every minute"))
    await reply_stored(bot.api, bot.store, CHAT, replies)
    assert tool_result(bot)["job"] == "j1"

    def ticks() -> list[dict[str, object]]:
        return [m for m in bot.api.sent_messages(CHAT) if m["text"] == "Tick"]

    # the first at its time, the second at the next minute: at most 62 s of wall time
    await bot.api.wait_for_sent(CHAT, replies + 2, timeout=deadline(EVENT) + 62)

    async def two_delivered() -> bool:
        runs = await runs_of(bot)
        return sum(run.status == "delivered" for run in runs) == 2

    await eventually(two_delivered, timeout=EVENT + 62)
    await asyncio.sleep(1)  # ten more polls inside the second period: nothing more is sent
    sent = ticks()
    assert len(sent) == 2, sent
    delivered = sorted(
        (run for run in await runs_of(bot) if run.status == "delivered"), key=lambda r: r.due_at
    )
    assert [run.message_id for run in delivered] == [m["message_id"] for m in sent]
    first, second = (run.due_at for run in delivered)
    assert second.second == 0  # the cron's minute, not the first run's time plus 60 s
    assert timedelta(0) < second - first <= timedelta(seconds=60)

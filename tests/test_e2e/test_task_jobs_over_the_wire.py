"""Scheduled tasks end to end (issue 46, `mode = "task"`): `tgbot run` against the fake Bot
API, with a scripted model that calls `schedule(mode="task")` a few seconds ahead
(Asia/Shanghai local time). At its time exactly one model call is made, with the instruction
in the per-turn context after the history (never in it), ledgered `purpose: job`; its answer
is sent to the chat once and the run recorded delivered with that message's id; the stored
history gains the bot's answer and nothing else. A task whose route is down falls back like
any turn."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from adapters.llm.openai_server_wire import from_request
from adapters.llm.scripted import CallTool, Reply, ScriptedModel
from bot.domain.ids import SessionKey
from bot.domain.records import AssistantRecord, StoredRecord
from bot.ports import LLMRequest, LLMResponse
from storage.jobs import SqlJobStore
from testkit.fake_server import FakeOpenAIServer
from testkit.openai_answers import error_body
from tests.bot_process import ScriptedBot, StartBot, eventually
from tests.deadlines import EVENT, deadline
from tests.test_e2e.test_fallback_over_the_wire import CHAT as PRIVATE
from tests.test_e2e.test_fallback_over_the_wire import fallback_bot
from tests.test_e2e.test_jobs_over_the_wire import ALICE, CHAT, CONFIG, ask, local_iso, runs_of

pytestmark = pytest.mark.slow

INSTRUCTION = "Post a two-line digest of what the team decided today."
DIGEST = "Digest: the release moves to Friday; QA signs off Thursday."


def answer(request: LLMRequest) -> LLMResponse:
    """The digest when a scheduled task asks (its block is the last message), else ok."""
    last = request.messages[-1]
    if last.role == "user" and last.content.startswith("[Scheduled task]"):
        return LLMResponse(text=DIGEST)
    return LLMResponse(text="ok")


async def history(bot: ScriptedBot) -> tuple[StoredRecord, ...]:
    session = await bot.store.find_session(SessionKey(chat_id=CHAT))
    assert session is not None
    return (await bot.store.load_history(session.id, max_records=100)).records


def ledger(bot: ScriptedBot) -> list[dict[str, object]]:
    return [
        json.loads(line)
        for path in (bot.bot.data_dir / "agent-traces").glob("*.jsonl")
        for line in path.read_text("utf-8").splitlines()
    ]


async def test_a_task_makes_one_model_call_with_the_instruction_as_per_turn_context(
    bot_running: StartBot,
) -> None:
    model = ScriptedModel(default=answer)
    bot = await bot_running(model, config=CONFIG, BOT_TIMEZONE="Asia/Shanghai", BOT_LOCALE="en")
    await ask(bot, model, "we settled it: the release moves to Friday", Reply("Noted."))
    at = local_iso(3)
    await ask(
        bot,
        model,
        "post a digest in a moment",
        CallTool("schedule", {"at": at, "text": INSTRUCTION, "mode": "task"}),
        Reply("Set: j1."),
    )
    result = [m for m in from_request(bot.llm.requests[-1]).messages if m.role == "tool"][-1]
    assert json.loads(result.content)["mode"] == "task"
    calls = len(bot.llm.requests)
    before = await history(bot)
    sent = len(bot.api.sent_messages(CHAT))

    (*_, digest) = await bot.api.wait_for_sent(CHAT, sent + 1, timeout=deadline(EVENT))
    assert digest["text"] == DIGEST

    async def delivered() -> bool:
        return any(run.status == "delivered" for run in await runs_of(bot))

    await eventually(delivered)
    (run,) = await runs_of(bot)
    assert (run.message_id, run.late) == (digest["message_id"], False)

    # exactly one model call, the instruction in its per-turn context and not in history
    assert len(bot.llm.requests) == calls + 1
    messages = from_request(bot.llm.requests[-1]).messages
    *earlier, current = messages
    assert current.role == "user"
    assert current.content.startswith("[Scheduled task]\njob: j1\nset by: Alice (user_id:1001)")
    assert f"instruction:\n{INSTRUCTION}" in current.content
    assert "[Turn context]" in current.content
    assert not any("[Scheduled task]" in m.content for m in earlier)
    assert not any(INSTRUCTION in m.content for m in earlier if m.role == "user")
    assert earlier[-1].role in ("assistant", "tool")  # the scheduling turn ended the history

    # ledgered `purpose: job`, one line
    async def ledgered() -> bool:
        return [line["purpose"] for line in ledger(bot)].count("job") == 1

    await eventually(ledgered)
    (job_line,) = [line for line in ledger(bot) if line["purpose"] == "job"]
    assert job_line["chat"] == CHAT

    # the history gains the bot's answer and nothing else; no record holds the instruction
    # block, no member's message its text
    after = await history(bot)
    assert after[: len(before)] == before
    (added,) = after[len(before) :]
    assert isinstance(added.body, AssistantRecord)
    assert added.body.text == DIGEST
    assert digest["message_id"] in added.message_ids
    assert not any("[Scheduled task]" in repr(record.body) for record in after)

    # the next member turn sees the digest as the bot's message, and no instruction
    await ask(bot, model, "thanks")
    following = from_request(bot.llm.requests[-1]).messages
    assert any(m.role == "assistant" and m.content.endswith(DIGEST) for m in following)
    assert not any("[Scheduled task]" in m.content for m in following)
    await asyncio.sleep(0.5)  # more polls: it ran once
    assert [m["text"] for m in bot.api.sent_messages(CHAT)].count(DIGEST) == 1
    assert bot.api.sent_messages(ALICE["id"]) == []  # no failure told to the creator


async def test_a_task_whose_route_is_down_falls_back_like_any_turn(tmp_path: Path) -> None:
    """The primary answers 503 when the task runs: its fallback writes the answer, which is
    sent once and recorded delivered; both attempts are `purpose: job` ledger lines."""

    def main_answer(request: LLMRequest) -> LLMResponse:
        return LLMResponse(text="main says: ok")

    model = ScriptedModel(default=main_answer)
    async with fallback_bot(tmp_path, cooldown=0, main=FakeOpenAIServer(model)) as rig:
        at = (datetime.now(UTC) + timedelta(seconds=3)).isoformat(timespec="seconds")
        model.add(
            CallTool("schedule", {"at": at, "text": INSTRUCTION, "mode": "task"}),
            Reply("Set."),
        )
        assert await rig.say("post a digest in a moment", 1) == "Set."
        rig.main.fail_next(503, error_body("overloaded", kind="server_error"))
        chat = PRIVATE
        (_, answered) = await rig.api.wait_for_sent(chat, 2, timeout=deadline(EVENT))
        assert str(answered["text"]).startswith("backup says:")

        async def delivered() -> bool:
            runs = await SqlJobStore(rig.store.engine).runs()
            return any(run.status == "delivered" for run in runs)

        await eventually(delivered)
        (run,) = await SqlJobStore(rig.store.engine).runs()
        assert run.message_id == answered["message_id"]
        jobs = [
            (line["route"], line["fallback_from"], line["error"] is None)
            for line in rig.ledger()
            if line["purpose"] == "job"
        ]
        assert jobs == [("main", None, False), ("backup", "main", True)]
        await asyncio.sleep(0.5)
        assert len(rig.api.sent_messages(chat)) == 2  # no failure notice, one answer

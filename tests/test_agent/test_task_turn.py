"""A scheduled task's turn on the real turn path (the shared app rig: in-memory store,
scripted model, recording sender): the instruction rides in a per-turn message after the
history and is never stored; the history before it renders as every turn renders it (the
cached prefix holds); its calls are ledgered `purpose: job` and charged to the task's
creator; the job runner records the run delivered with its answer's message id, or failed
with the reason and the creator told."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, timedelta
from pathlib import Path

from adapters.llm.scripted import CallTool, Reply, ScriptedModel
from bot.agent.ledger_read import read_entries
from bot.app.jobs import task_turns
from bot.app.wiring import App
from bot.context.task_block import TaskInstruction
from bot.domain.ids import SessionKey
from bot.domain.messages import ChatMessage
from bot.ports import LLMRequest, LLMResponse, SessionInfo, Usage
from bot.services.jobs import JobDelivery, JobRequest, JobRunner
from bot.texts import text
from testkit.memory_store import InMemoryStore
from tests.fakes import ALICE, BOB, RecordingMessenger, SteppingClock
from tests.test_agent.rig import CHAT, make_app, say

INSTRUCTION = "Summarise what the team decided this week."


def task(creator: int = ALICE.id, name: str = "Alice", job: str = "j3") -> TaskInstruction:
    return TaskInstruction(
        job=job,
        creator_id=creator,
        creator_name=name,
        due="2026-11-30 14:05 (UTC)",
        text=INSTRUCTION,
    )


def answer(request: LLMRequest) -> LLMResponse:
    return LLMResponse(text="Here is the digest.", usage=Usage(input_tokens=1_000, output_tokens=0))


def shown(messages: tuple[ChatMessage, ...] | list[ChatMessage]) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in messages]


async def group_session(app: App, store: InMemoryStore) -> SessionInfo:
    session = await store.find_session(SessionKey(chat_id=CHAT))
    assert session is not None
    return session


async def test_the_instruction_rides_after_the_history_and_is_never_stored(
    tmp_path: Path, messenger: RecordingMessenger
) -> None:
    model = ScriptedModel(default=answer)
    app, store, clock = make_app(tmp_path, model, messenger)
    await say(app, clock, 1, "@Helper hello", mentions_bot=True)
    await say(app, clock, 2, "we picked Friday for the release", sender=BOB)  # not answered
    session = await group_session(app, store)
    clock.advance(60)
    # what a member's turn would send at this point (a preview: nothing stored or called)
    preview = await app.runner.prepare(session, turn_id="preview", persist_window=False)
    calls = len(model.requests)

    outcome = await app.runner.run_turn(session, reply_to=None, task=task())

    assert outcome.status == "answered"
    assert outcome.trigger == "job"  # what its log line says started it
    assert len(model.requests) == calls + 1
    request = model.requests[-1]
    *history, current = request.messages
    assert current.role == "user"
    assert current.content.startswith("[Scheduled task]\njob: j3\nset by: Alice (user_id:1001)\n")
    assert INSTRUCTION in current.content
    assert "\n\n[Turn context]\n" in current.content
    assert history[0].role == "system"
    assert not any(INSTRUCTION in m.content or "[Turn context]" in m.content for m in history[1:])
    # Bob's message is history, rendered without per-turn blocks; everything before it is
    # byte for byte what a member's turn sends before its current message
    assert history[-1].content.endswith("we picked Friday for the release")
    before_current = preview.messages[: preview.layout.current_index]
    assert shown(history[: len(before_current)]) == shown(before_current)
    assert messenger.texts(CHAT)[-1] == "Here is the digest."

    # the next member's turn repeats the task request's history exactly (its cached prefix),
    # then the task's answer; the instruction is nowhere
    await say(app, clock, 3, "@Helper thanks", mentions_bot=True)
    following = model.requests[-1].messages
    assert shown(following[: len(history)]) == shown(history)
    assert following[len(history)].role == "assistant"
    assert following[len(history)].content.endswith("Here is the digest.")
    assert not any(INSTRUCTION in m.content or "[Scheduled task]" in m.content for m in following)

    # stored: the bot's answer, never the instruction
    stored = await store.load_history(session.id, max_records=50)
    assert not any(INSTRUCTION in repr(record.body) for record in stored.records)
    assert any("Here is the digest." in repr(record.body) for record in stored.records)

    purposes = [e.purpose for e in read_entries(tmp_path / "agent-traces")]
    assert purposes == ["turn", "job", "turn"]


async def test_the_creator_is_the_spend_requester_and_a_refused_task_is_silent_in_the_chat(
    tmp_path: Path, messenger: RecordingMessenger
) -> None:
    model = ScriptedModel(default=answer)
    app, store, clock = make_app(tmp_path, model, messenger, limits={"member_daily_tokens": 1_500})
    await say(app, clock, 1, "@Helper hello", mentions_bot=True)  # Alice: 1,000 of 1,500
    session = await group_session(app, store)
    sent = len(messenger.texts(CHAT))

    first = await app.runner.run_turn(session, reply_to=None, task=task())  # 2,000: over after
    assert first.status == "answered"
    refused = await app.runner.run_turn(session, reply_to=None, task=task())
    assert refused.status == "failed"
    assert refused.failure == "budget"
    assert refused.error is not None
    assert "spent" in refused.error
    assert len(model.requests) == 2
    assert len(messenger.texts(CHAT)) == sent + 1  # the first task's answer, no notice

    # Bob's task is charged to Bob, who has spent nothing
    bobs = await app.runner.run_turn(session, reply_to=None, task=task(BOB.id, "Bob", "j4"))
    assert bobs.status == "answered"
    assert len(model.requests) == 3


class TaskRig:
    """The job book and runner of the app, `task` runs on its real turn path."""

    def __init__(self, app: App, clock: SteppingClock) -> None:
        assert app.jobs is not None
        self.book = app.jobs

        @asynccontextmanager
        async def lock(session: SessionInfo) -> AsyncIterator[None]:
            async with app.inbound.turns.turn_lock(session):
                yield

        self.runner = JobRunner(
            app.jobs.store,
            app.jobs.policy,
            clock,
            JobDelivery(
                messenger=app.messenger,
                notices=app.outside,
                sessions=app.store,
                history=app.store,
                turn_lock=lock,
                bot_id=7,
                bot_name="Helper",
                locale_for_chat=lambda chat: "en",
                task_turn=task_turns(app.runner),
            ),
        )

    async def schedule(self, clock: SteppingClock) -> None:
        """Alice's task, a minute ahead (UTC wall clock, as the model would write it)."""
        at = clock.now().replace(second=0, microsecond=0, tzinfo=None) + timedelta(minutes=1)
        await self.book.schedule(
            JobRequest(
                asker_id=ALICE.id,
                asker_name="Alice",
                here_chat=CHAT,
                here_thread=0,
                at=at.isoformat(),
                text=INSTRUCTION,
                mode="task",
                zone=UTC,
            )
        )


async def test_a_task_run_is_delivered_with_its_answer_s_message_id(
    tmp_path: Path, messenger: RecordingMessenger
) -> None:
    model = ScriptedModel(default=answer)
    app, _store, clock = make_app(tmp_path, model, messenger)
    await say(app, clock, 1, "@Helper hello", mentions_bot=True)
    rig = TaskRig(app, clock)
    await rig.schedule(clock)
    calls = len(model.requests)
    assert await rig.runner.tick() == 0  # not yet due
    clock.advance(120)
    assert await rig.runner.tick() == 1
    assert len(model.requests) == calls + 1
    assert "job: j1" in model.requests[-1].messages[-1].content
    answer_sent = messenger.sent[-1]
    assert answer_sent.text == "Here is the digest."
    (run,) = await rig.book.store.runs()
    assert (run.status, run.message_id) == ("delivered", answer_sent.message_id)
    await rig.runner.tick()
    assert len(model.requests) == calls + 1  # once


async def test_a_task_whose_turn_fails_is_recorded_failed_and_its_creator_told(
    tmp_path: Path, messenger: RecordingMessenger
) -> None:
    model = ScriptedModel(default=answer)
    app, _store, clock = make_app(tmp_path, model, messenger, limits={"member_daily_tokens": 500})
    await say(app, clock, 1, "@Helper hello", mentions_bot=True)  # Alice is over now
    rig = TaskRig(app, clock)
    await rig.schedule(clock)
    in_chat = len(messenger.texts(CHAT))
    calls = len(model.requests)
    clock.advance(120)
    await rig.runner.tick()
    assert len(model.requests) == calls  # refused before the call
    (run,) = await rig.book.store.runs()
    assert run.status == "failed"
    assert run.message_id is None
    assert run.error is not None
    assert "spent" in run.error
    assert len(messenger.texts(CHAT)) == in_chat  # the chat hears nothing of it
    (told,) = messenger.texts(ALICE.id)
    assert told == text("en", "jobs_task_failed", job="j1", preview=INSTRUCTION, reason=run.error)


async def test_a_task_s_tools_act_with_its_creator_s_rights(
    tmp_path: Path, messenger: RecordingMessenger
) -> None:
    """Bob wrote last, Alice's task runs: what its tools do is done as Alice."""
    model = ScriptedModel(default=answer)
    app, store, clock = make_app(tmp_path, model, messenger)
    await say(app, clock, 1, "@Helper hello", mentions_bot=True)
    await say(app, clock, 2, "chatter", sender=BOB)
    session = await group_session(app, store)
    at = clock.now().replace(second=0, microsecond=0, tzinfo=None) + timedelta(days=1)
    model.add(
        CallTool("schedule", {"at": at.isoformat(), "text": "follow up", "mode": "post"}),
        Reply("Scheduled the follow-up."),
    )
    outcome = await app.runner.run_turn(session, reply_to=None, task=task())
    assert outcome.status == "answered"
    assert app.jobs is not None
    (job,) = await app.jobs.store.list_jobs()
    assert job.creator_id == ALICE.id


async def test_a_task_in_a_chat_with_no_history_is_answered(
    tmp_path: Path, messenger: RecordingMessenger
) -> None:
    model = ScriptedModel(default=answer)
    app, store, _clock = make_app(tmp_path, model, messenger)
    session = await store.open_session(SessionKey(chat_id=CHAT), scene="group")
    outcome = await app.runner.run_turn(session, reply_to=None, task=task())
    assert outcome.status == "answered"
    (request,) = model.requests
    assert [m.role for m in request.messages] == ["system", "user"]
    assert request.messages[-1].content.startswith("[Scheduled task]")
    stored = await store.load_history(session.id, max_records=10)
    assert [r.kind for r in stored.records] == ["assistant"]

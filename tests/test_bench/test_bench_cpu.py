"""The CPU-per-message rows of `python -m bench`: three real bot processes under one load,
in each traffic shape, and a naive baseline written fairly."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from adapters.llm.openai_server_wire import from_request
from adapters.llm.scripted import ScriptedModel
from bench import bench_cpu, floor_bots
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer
from tests.deadlines import EVENT, PROCESS_READY, REAP, deadline


@pytest.mark.slow
async def test_every_bot_answers_every_message_in_every_shape_and_is_charged_its_own_cpu(
    tmp_path: Path,
) -> None:
    quiet = bench_cpu.Shape("quiet", 2, 2)
    result = await bench_cpu.run_cpu([bench_cpu.burst(3, 2), quiet], tmp_path)
    burst, quiet = result.shape("burst"), result.shape("quiet")
    assert burst.shape.messages == 6
    for shape in (burst, quiet):
        for bot in shape.bots:
            assert bot.answered == bot.messages == shape.shape.messages, bot.label
            assert bot.cpu_seconds >= 0, bot.label
            assert bot.polls >= 1, bot.label
        assert shape.echo.model_calls == 0
        assert shape.naive.model_calls == shape.shape.messages
        assert shape.ours.model_calls >= shape.shape.messages
        assert shape.vs_echo == shape.ours.ms_per_message / shape.echo.ms_per_message
    assert burst.waiting is None  # merge window off: nothing to wait out
    assert quiet.waiting is not None
    assert quiet.waiting.model_calls == quiet.shape.messages
    # connections are pooled: never more than the chats served at once
    assert 0 < burst.ours.connections <= 3
    names = [name for name, _, _ in result.targets()]
    assert any(name.startswith("burst:") and "1.5× the fair naive" in name for name in names)
    assert any(name.startswith("quiet:") and "6× the echo" in name for name in names)
    assert "`tgbot run` (SQLite)" in result.markdown()


@pytest.mark.slow
async def test_the_naive_bot_commits_in_wal_through_one_pooled_model_connection(
    tmp_path: Path,
) -> None:
    """The baseline a careful engineer writes: WAL with synchronous NORMAL, and every model
    call of a conversation on one kept-alive connection (not one per call)."""
    shape = bench_cpu.Shape("one chat", 1, 5)
    async with FakeOpenAIServer(ScriptedModel(keep_requests=False)) as llm:
        naive = await bench_cpu.measure_bot(
            "naive",
            [sys.executable, "-m", "bench.floor_bots", "naive"],
            shape,
            tmp_path,
            llm,
            chat_base=7_000,
        )
    assert naive.answered == naive.model_calls == 5
    assert naive.connections == 1
    database = sqlite3.connect(tmp_path / "naive.sqlite3")
    try:
        assert database.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        stored = database.execute("SELECT role, count(*) FROM messages GROUP BY role").fetchall()
    finally:
        database.close()
    assert sorted(stored) == [("assistant", 5), ("user", 5)]


async def test_the_naive_bots_client_and_database_are_configured_like_a_service(
    tmp_path: Path,
) -> None:
    database = floor_bots.open_database(str(tmp_path / "db.sqlite3"))
    try:
        assert database.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert database.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL
    finally:
        database.close()
    async with floor_bots.model_client("http://127.0.0.1:9") as client:
        pool = client._transport._pool  # type: ignore[attr-defined]  # httpcore's pool
        assert pool._max_connections == floor_bots.MODEL_CONNECTIONS
        assert pool._max_keepalive_connections == floor_bots.MODEL_CONNECTIONS
        assert client.timeout.read == floor_bots.MODEL_TIMEOUT_SECONDS


@pytest.mark.slow
async def test_the_waiting_naive_bot_answers_a_burst_once_with_all_of_it(tmp_path: Path) -> None:
    """The reference beside the shapes with defaults: the naive bot keeping the merge
    window's rule, two messages sent together are one model call and one answer."""
    async with (
        FakeOpenAIServer(ScriptedModel()) as llm,
        FakeBotApi(bench_cpu.TOKEN, username="cpu_bot", first_name="Cpu") as api,
    ):
        env = bench_cpu._environment(api, tmp_path, llm.base_url, bench_cpu.QUIET, None)
        process = subprocess.Popen(  # noqa: ASYNC220 (started, waited on in a thread)
            [sys.executable, "-m", "bench.floor_bots", "naive"],
            cwd=bench_cpu.ROOT,
            env=env | {"MERGE_WINDOW_SECONDS": "0.5"},
        )
        try:
            await api.wait_for_call("getUpdates", 1, timeout=deadline(PROCESS_READY))
            for text in ("first half", "second half"):
                api.push_update(api.user_message(5, 5, text, chat_type="private"))
            await api.wait_for_sent(5, 1, timeout=deadline(EVENT))
        finally:
            process.terminate()
            await asyncio.to_thread(process.wait, deadline(REAP))
    assert len(api.sent_messages(5)) == 1
    (request,) = llm.requests
    said = [message.content for message in from_request(request).messages]
    assert said[-2:] == ["first half", "second half"]


def test_an_unknown_shape_is_refused_before_anything_runs() -> None:
    with pytest.raises(ValueError, match="unknown shapes"):
        bench_cpu.run(shapes=("bursty",))


async def test_the_open_loop_sends_on_time_whatever_was_answered() -> None:
    """The steady shape's arrival does not wait for answers: with no bot at all every
    message is still queued, and only the wait for answers gives up."""
    async with FakeBotApi("1:x", username="b", first_name="B") as api:
        with pytest.raises(TimeoutError):
            await bench_cpu._open_loop(api, [1, 2], 3, rate=100.0, answer_timeout=0.2)
        assert api.calls_of("getUpdates") == []
        assert len(api._updates) == 6  # queued for a poll that never came


def test_cpu_seconds_reads_this_process_user_and_system_time() -> None:
    before = bench_cpu.cpu_seconds(os.getpid())
    sum(n * n for n in range(3_000_000))  # about 0.1 s of CPU: more than a clock tick
    assert bench_cpu.cpu_seconds(os.getpid()) > before


class PushTimes(FakeBotApi):
    """The fake Bot API noting when each update was pushed."""

    def __init__(self) -> None:
        super().__init__("1:x", username="b", first_name="B")
        self.pushed: asyncio.Queue[float] = asyncio.Queue()

    def push_update(self, update: Mapping[str, Any], *, update_id: int | None = None) -> int:
        self.pushed.put_nowait(asyncio.get_running_loop().time())
        return super().push_update(update, update_id=update_id)


async def test_the_thinking_member_writes_each_next_message_a_while_after_the_reply() -> None:
    """The `thinking` shape: a reply arrives, and the member's next message follows only
    `think` seconds later (the quiet shape sends it at once)."""
    async with PushTimes() as api:
        conversation = asyncio.create_task(bench_cpu._closed_loop(api, [5], 2, think=0.3))
        await api.pushed.get()
        api._store_sent({"message_id": 1, "chat": {"id": 5}, "text": "first answer"})
        replied_at = asyncio.get_running_loop().time()
        assert await api.pushed.get() - replied_at >= 0.3
        api._store_sent({"message_id": 2, "chat": {"id": 5}, "text": "second answer"})
        assert await conversation == 2
    assert bench_cpu.QUIET.think == 0
    assert "2 s after the previous reply" in bench_cpu.THINKING.describe()

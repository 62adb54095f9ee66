"""`tgbot chat`: the owner's private chat in the terminal, through the turns `tgbot run` takes.

`tgbot chat` runs as a real subprocess, typed to through a pipe, against the fake
OpenAI-compatible server (the configured model path is real HTTP) and, to show that
nothing reaches Telegram, with BOT_TOKEN and TELEGRAM_API_BASE pointing at a fake Bot API
that must see no call at all. The in-process tests drive `converse` over a pipe with the
offline model: what a line the bot would not take (empty, oversized) does.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from adapters.llm.scripted import CallTool, Reply, ScriptedModel
from adapters.telegram.terminal import PlatformIds, TerminalMessenger
from bot.app.chat_command import TypedLines, _chat_app, chat_settings, converse
from bot.clock import SystemClock
from bot.config import load_settings
from bot.ports import LLMRequest
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer
from tests.deadlines import EVENT, REAP, deadline

ROOT = Path(__file__).resolve().parents[2]
OWNER = 4242
KETTLE = "Where did we put the blue kettle?"
FIRST = "On the second shelf, next to the tea."
FOLLOW_UP = "And what did I just ask you?"
SECOND = "You asked where the blue kettle is."


class ChatProcess:
    """`python -m bot.app.cli chat` with pipes for its standard streams."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.out: list[str] = []

    async def say(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode() + b"\n")
        await self.process.stdin.drain()

    async def read_until(self, wanted: str) -> list[str]:
        """Lines of stdout up to and including the first that contains `wanted`."""
        assert self.process.stdout is not None
        start = len(self.out)
        async with asyncio.timeout(deadline(EVENT)):
            while True:
                raw = await self.process.stdout.readline()
                if not raw:
                    raise AssertionError(
                        f"stdout ended before {wanted!r}; it said {self.out[start:]}; "
                        f"stderr: {await self._stderr()}"
                    )
                self.out.append(raw.decode().rstrip("\n"))
                if wanted in self.out[-1]:
                    return self.out[start:]

    async def end_input(self) -> tuple[int, str, str]:
        """Close stdin (Ctrl-D) and wait for the exit: (code, rest of stdout, stderr)."""
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.close()
        async with asyncio.timeout(deadline(REAP)):
            rest = await self.process.stdout.read()
            code = await self.process.wait()
        return code, rest.decode(), await self._stderr()

    async def _stderr(self) -> str:
        assert self.process.stderr is not None
        if self.process.returncode is None:
            return "(still running)"
        return (await self.process.stderr.read()).decode()


@asynccontextmanager
async def chat_process(*args: str, env: dict[str, str]) -> AsyncIterator[ChatProcess]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.app.cli",
        "chat",
        *args,
        env=env,
        cwd=ROOT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        yield ChatProcess(process)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def _env(data_dir: Path, llm: FakeOpenAIServer, api: FakeBotApi, **extra: str) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(data_dir),
        "DATA_DIR": str(data_dir),
        "OWNER_ID": str(OWNER),
        "BOT_LOCALE": "en",
        "LLM_BASE_URL": llm.base_url,
        "LLM_API_KEY": "sk-test-key",
        "LLM_MODEL": "fake-model",
        # a token and an API that answer: `tgbot chat` must still never call them
        "BOT_TOKEN": api.token,
        "TELEGRAM_API_BASE": api.base_url,
        **extra,
    }


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = body["messages"]
    return messages


def _text(message: dict[str, Any]) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content)


def _ledger(data_dir: Path) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    for day in sorted((data_dir / "agent-traces").glob("*.jsonl")):
        lines.extend(json.loads(line) for line in day.read_text().splitlines())
    return lines


@pytest.mark.slow
async def test_chat_answers_the_owner_through_the_model_and_never_calls_telegram(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([Reply(FIRST), Reply(SECOND)], model="fake-model")
    async with (
        FakeOpenAIServer(model) as llm,
        FakeBotApi() as api,
        chat_process(env=_env(tmp_path, llm, api)) as chat,
    ):
        await chat.say(KETTLE)
        said = await chat.read_until(FIRST)
        assert said[-1] == FIRST
        assert len(llm.requests) == 1
        # the dim line after the reply: the route, one call and the tokens it reported
        meter = await chat.read_until("· default:fake-model · 1 call · ")
        assert " in " in meter[-1]
        assert " out · " in meter[-1]

        await chat.say("")  # an empty line is no message: nothing is sent to the model
        await chat.say(FOLLOW_UP)
        await chat.read_until(SECOND)
        await chat.read_until("· default:fake-model · 1 call · ")
        # a command is the bot's own, answered without the model, as in Telegram
        await chat.say("/id")
        said = await chat.read_until("I am in no group yet")
        assert said[0] == f"Your user id: {OWNER}"
        await chat.say("/exit")
        await chat.say("are you still there?")
        code, rest, err = await chat.end_input()
        assert code == 0, err
        assert rest == ""  # the line after /exit was never read
        assert api.calls == []  # no getMe, no sendMessage: Telegram never heard of it

    assert "you are the owner (user 4242) in your private chat" in err
    assert "model default:fake-model at http://127.0.0.1:" in err
    assert len(llm.requests) == 2
    first, second = (_messages(body) for body in llm.requests)
    # the owner's private-chat prompt: the owner scene, the owner named by id
    assert first[0]["role"] == "system"
    system = _text(first[0])
    assert "You are in a private chat with your owner" in system
    assert f"user_id:{OWNER}" in system
    # no history yet; the current message carries the text and the per-turn context
    assert [m["role"] for m in first[1:]] == ["user"]
    assert KETTLE in _text(first[-1])
    assert "[Turn context]" in _text(first[-1])
    # the second request has the first exchange as history, the new line as current
    assert _text(second[0]) == system  # the same prompt: the cached prefix holds
    history = second[1:-1]
    assert [m["role"] for m in history] == ["user", "assistant"]
    assert KETTLE in _text(history[0])
    assert "[Turn context]" not in _text(history[0])
    assert FIRST in _text(history[1])
    assert FOLLOW_UP in _text(second[-1])

    ledger = _ledger(tmp_path)
    assert [(e["chat"], e["scene"], e["purpose"], e["model"]) for e in ledger] == [
        (OWNER, "owner", "turn", "fake-model"),
    ] * 2
    assert "sk-test-key" not in rest + err


@pytest.mark.slow
async def test_without_an_owner_it_says_what_to_set_and_creates_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with FakeOpenAIServer() as llm, FakeBotApi() as api:
        env = _env(data, llm, api)
        del env["OWNER_ID"]
        async with chat_process(env=env) as chat:
            code, _out, err = await chat.end_input()
    assert code == 2
    assert "OWNER_ID: unset" in err
    assert "--fresh" in err
    assert not data.exists()


@pytest.mark.slow
async def test_fresh_talks_as_a_stand_in_owner_and_leaves_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with FakeOpenAIServer(ScriptedModel([Reply("hello")])) as llm, FakeBotApi() as api:
        env = _env(data, llm, api)
        del env["OWNER_ID"]
        async with chat_process("--fresh", env=env) as chat:
            await chat.say("hi")
            await chat.read_until("hello")
            code, _, err = await chat.end_input()  # Ctrl-D: the end of input
    assert code == 0, err
    assert "a throw-away database" in err
    assert "user_id:1." in _text(_messages(llm.requests[0])[0])
    assert not data.exists()  # the configured DATA_DIR was never touched


# ---------------------------------------------------------------- bad input, in process


def _write_and_close(fd: int, data: bytes) -> None:
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


async def typed(
    tmp_path: Path, data: bytes, *, max_bytes: int = 1 << 20, model: ScriptedModel | None = None
) -> tuple[str, list[LLMRequest]]:
    """`data` typed into `converse` on the app `tgbot chat` builds (SQLite under
    `tmp_path`, the offline model) until its end: what was printed, what the model got."""
    base = load_settings(None).model_copy(
        update={"data_dir": tmp_path, "owner_id": OWNER, "bot_locale": "en"}
    )
    settings, owner = chat_settings(base, data_dir=None)
    model = model or ScriptedModel()  # by default it echoes the last user message
    out = io.StringIO()
    messenger = TerminalMessenger(out, chat_id=OWNER, ids=PlatformIds(), now=SystemClock().now)
    read_end, write_end = os.pipe()
    try:
        async with _chat_app(settings, messenger, offline=model) as app:
            # written from a thread: a line longer than the pipe's buffer waits for the reader
            writer = asyncio.create_task(asyncio.to_thread(_write_and_close, write_end, data))
            async with asyncio.timeout(deadline(EVENT)):
                await converse(app, TypedLines(read_end, max_bytes=max_bytes), messenger, owner)
                await writer
    finally:
        os.close(read_end)
    return out.getvalue(), model.requests


def _current(request: LLMRequest) -> str:
    return request.messages[-1].content


async def test_empty_and_blank_lines_are_not_messages(tmp_path: Path) -> None:
    out, requests = await typed(tmp_path, b"\n   \n\t\r\nhello there\r\n\n")
    assert len(requests) == 1
    assert "hello there" in _current(requests[0])
    assert out.splitlines()[0].endswith("hello there")  # the offline model echoes it


async def test_a_line_past_telegram_s_limit_goes_as_the_messages_telegram_would_make(
    tmp_path: Path,
) -> None:
    words = [f"w{i:04d}" for i in range(1_500)]  # 1,500 six-character words: 8,999 chars
    out, requests = await typed(tmp_path, " ".join(words).encode() + b"\nnext\n")
    assert "(sent as 3 messages, as Telegram splits a text over 4,096 characters)" in out
    # one turn for the burst, then one for the next line; nothing of the long line is lost
    seen = "\n".join(m.content for m in requests[-1].messages if m.role == "user")
    assert all(word in seen for word in words)
    assert "next" in _current(requests[-1])


async def test_a_line_over_the_read_limit_is_refused_and_the_next_one_answered(
    tmp_path: Path,
) -> None:
    huge = b"x" * 5_000
    out, requests = await typed(tmp_path, huge + b"\nstill here\n", max_bytes=1_000)
    assert "(a line over 1,000 bytes was not sent; nothing of it is kept)" in out
    assert len(requests) == 1
    assert "still here" in _current(requests[0])
    assert "xxxx" not in _current(requests[0])


async def test_exit_ends_the_chat_before_the_lines_after_it(tmp_path: Path) -> None:
    out, requests = await typed(tmp_path, b"/EXIT\nnever read\n")
    assert requests == []
    assert out == ""


async def test_bytes_that_are_not_utf8_are_replaced_not_fatal(tmp_path: Path) -> None:
    _out, requests = await typed(tmp_path, b"caf\xe9 au lait\n")
    assert "caf\ufffd au lait" in _current(requests[0])


async def test_tools_act_in_the_terminal_chat(tmp_path: Path) -> None:
    model = ScriptedModel(
        [CallTool("send_message", {"text": "An extra note, sent by a tool."}), Reply("Done.")]
    )
    out, requests = await typed(tmp_path, b"send me a note\n", model=model)
    lines = out.splitlines()
    assert lines[:2] == ["An extra note, sent by a tool.", "Done."]
    assert lines[2].startswith("· default:offline-demo · 2 calls · ")
    tool_result = next(m for m in requests[1].messages if m.role == "tool")
    assert '"sent": true' in tool_result.content

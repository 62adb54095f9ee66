"""Running tools: aliases rewritten to platform ids, call and results stored, errors as results."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import bot.agent.tool_runner as tool_runner_module
from adapters.llm.scripted import CallTool, Reply, ScriptedModel
from bot.agent.tool_runner import ToolRunner
from bot.context.alias_table import AliasTable
from bot.context.tool_results import tool_result_message
from bot.domain.ids import SessionKey
from bot.domain.messages import ToolCall
from bot.domain.records import ToolResult
from bot.errors import TelegramError, ToolError
from bot.ports import SessionInfo, ToolSpec
from bot.tools.base import Tool, ToolContext, ToolFunction
from testkit.memory_store import InMemoryStore
from tests.fakes import CHEN, RecordingMessenger, SteppingClock
from tests.test_agent.rig import CHAT, make_app, say


async def test_tool_call_rewrites_the_alias_and_stores_call_with_result(
    tmp_path: Path, messenger: RecordingMessenger
) -> None:
    model = ScriptedModel([CallTool("delete_message", {"message_id": "m1"}), Reply("Deleted it.")])
    app, store, clock = make_app(tmp_path, model, messenger)
    await say(app, clock, 501, "spam spam", sender=CHEN)
    await say(app, clock, 502, "@Helper delete m1 please", mentions_bot=True, sender=CHEN)

    assert messenger.deleted == [(CHAT, 501)]
    second = model.requests[1]
    tool_message = second.messages[-1]
    assert tool_message.role == "tool"
    assert json.loads(tool_message.content)["deleted"] is True
    session = await store.find_session(SessionKey(chat_id=CHAT))
    assert session is not None
    kinds = [r.kind for r in await store.load_path(session.id)]
    assert kinds == ["user", "user", "assistant", "tool_results", "assistant"]


async def test_an_unknown_alias_sends_nothing_and_the_model_reads_an_error(
    tmp_path: Path, messenger: RecordingMessenger
) -> None:
    model = ScriptedModel(
        [CallTool("delete_message", {"message_id": "m999"}), Reply("I could not.")]
    )
    app, _store, clock = make_app(tmp_path, model, messenger)
    await say(app, clock, 7, "@Helper delete m999", mentions_bot=True)

    assert messenger.deleted == []
    result = model.requests[1].messages[-1]
    assert result.role == "tool"
    assert result.is_error
    assert "reference not confirmed" in result.content


async def test_a_failed_result_reads_with_one_prefix_this_turn_and_the_next(
    tmp_path: Path, messenger: RecordingMessenger
) -> None:
    model = ScriptedModel(
        [CallTool("delete_message", {"message_id": "m999"}), Reply("I could not."), Reply("Hi.")]
    )
    app, _store, clock = make_app(tmp_path, model, messenger)
    await say(app, clock, 7, "@Helper delete m999", mentions_bot=True)
    await say(app, clock, 8, "@Helper hello again", mentions_bot=True)

    this_turn = [m for m in model.requests[1].messages if m.role == "tool"]
    next_turn = [m for m in model.requests[2].messages if m.role == "tool"]
    assert len(this_turn) == len(next_turn) == 1
    assert this_turn[0].content.startswith("error[reference_not_confirmed]: ")
    assert next_turn[0].content.startswith("error[reference_not_confirmed]: ")
    assert next_turn[0].content.count("error[") == 1


def test_a_result_stored_with_its_prefix_keeps_one() -> None:
    legacy = ToolResult(
        call_id="c",
        name="t",
        content="error[not_found]: gone",
        is_error=True,
        error_code="not_found",
    )
    assert tool_result_message(legacy).content == "error[not_found]: gone"


# ---------------------------------------------------------------- one call, over fakes

SESSION = SessionInfo(id=1, key=SessionKey(chat_id=CHAT), scene="group")


def echo_tool(run: ToolFunction, name: str = "echo") -> Tool:
    return Tool(
        spec=ToolSpec(name=name, description="Echo.", parameters={"type": "object"}), run=run
    )


async def echo(args: Mapping[str, Any], _ctx: ToolContext) -> str:
    return json.dumps(args, sort_keys=True)


def tool_runner(*tools: Tool, max_result_chars: int = 1000) -> ToolRunner:
    store = InMemoryStore()
    return ToolRunner(
        tools={t.spec.name: t for t in tools},
        store=store,
        platform_messages=store,
        messenger=RecordingMessenger(),
        clock=SteppingClock(),
        bot_id=999,
        bot_name="Helper",
        max_result_chars=max_result_chars,
    )


async def run_call(runner: ToolRunner, name: str, arguments: str) -> ToolResult:
    aliases = AliasTable()
    aliases.register("m1", 501)
    call = ToolCall(id="c1", name=name, arguments=arguments)
    return await runner.run(call, aliases, runner.context(SESSION, ()))


async def test_a_tool_reads_platform_ids_where_the_model_wrote_aliases() -> None:
    result = await run_call(tool_runner(echo_tool(echo)), "echo", '{"message_id": "m1", "n": 2}')
    assert not result.is_error
    assert json.loads(result.content) == {"message_id": 501, "n": 2}


def raising(exc: Exception) -> ToolFunction:
    async def run(_args: Mapping[str, Any], _ctx: ToolContext) -> str:
        raise exc

    return run


@pytest.mark.parametrize(
    ("tool", "name", "arguments", "content"),
    [
        (echo_tool(echo), "nope", "{}", "error[unknown_tool]: there is no tool named 'nope'"),
        (
            echo_tool(echo),
            "echo",
            "{not json",
            "error[bad_arguments]: the arguments are not valid JSON",
        ),
        (
            echo_tool(echo),
            "echo",
            "[1]",
            "error[bad_arguments]: the arguments must be a JSON object",
        ),
        (echo_tool(echo), "echo", '{"message_id": "m2"}', "error[reference_not_confirmed]: "),
        (
            echo_tool(raising(ToolError("too long", code="too_long"))),
            "echo",
            "{}",
            "error[too_long]: too long",
        ),
        (
            echo_tool(raising(TelegramError("chat not found"))),
            "echo",
            "{}",
            "error[telegram]: TelegramError: chat not found",
        ),
        (echo_tool(raising(ValueError("bug"))), "echo", "{}", "error[internal]: ValueError"),
    ],
    ids=[
        "unknown tool",
        "invalid json",
        "not an object",
        "alias not shown",
        "tool error keeps its code",
        "telegram error",
        "a tool bug",
    ],
)
async def test_every_failure_is_an_error_result_the_model_reads(
    tool: Tool, name: str, arguments: str, content: str
) -> None:
    result = await run_call(tool_runner(tool), name, arguments)
    assert result.is_error
    assert tool_result_message(result).content.startswith(content)
    assert result.error_code == content.removeprefix("error[").split("]")[0]


async def test_a_tool_that_hangs_times_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tool_runner_module, "TOOL_TIMEOUT_SECONDS", 0.01)

    async def hang(_args: Mapping[str, Any], _ctx: ToolContext) -> str:
        await asyncio.Event().wait()
        return "never"

    result = await run_call(tool_runner(echo_tool(hang)), "echo", "{}")
    assert result.error_code == "timeout"


async def test_a_long_result_is_truncated_to_the_limit() -> None:
    async def long(_args: Mapping[str, Any], _ctx: ToolContext) -> str:
        return "x" * 5000

    result = await run_call(tool_runner(echo_tool(long), max_result_chars=300), "echo", "{}")
    assert not result.is_error
    assert len(result.content) < 400
    assert "truncated" in result.content
    assert result.content.startswith("x" * 100)

"""Findings 28.10 and 28.11 (tool arguments stored whole) with issue 25 item 11: tool
arguments nested 600 deep, or a megabyte long, are a tool error the model reads; the turn
goes on, the stored and replayed call keeps a short copy (cut like an old tool result), so
later requests stay small. Through a real turn over the OpenAI wire (the fake server), and
the webhook: a body nested 200,000 deep is a 400 like any malformed body."""

from __future__ import annotations

import json

import aiohttp
from aiogram import Dispatcher

from adapters.llm.scripted import Reply
from adapters.telegram.bot_session import build_bot
from adapters.telegram.webhook import WEBHOOK_PATH, WebhookServer
from bot.agent.tool_runner import MAX_ARGUMENT_CHARS
from bot.context.bounded_json import JsonTooDeep, loads_bounded, nesting_depth
from bot.domain.ids import SessionKey
from bot.domain.messages import ToolCall
from bot.domain.records import AssistantRecord
from bot.ports import LLMResponse
from tests.test_reliability.test_provider_faults import CHAT, Rig, rig  # noqa: F401


def _call(arguments: str) -> object:
    def respond(request: object) -> LLMResponse:
        return LLMResponse(
            tool_calls=(ToolCall(id="call_x", name="delete_message", arguments=arguments),)
        )

    return respond


async def test_arguments_nested_600_deep_are_a_tool_error(rig: Rig) -> None:  # noqa: F811
    deep = '{"message_id": ' + "[" * 600 + "]" * 600 + "}"
    rig.model.add(_call(deep), Reply("That did not work."))  # type: ignore[arg-type]
    assert await rig.say("delete m1") == ["That did not work."]
    tool = [m for m in rig.model.requests[-1].messages if m.role == "tool"][-1]
    assert tool.content.startswith("error[bad_arguments]")
    assert "levels deep" in tool.content


async def test_a_megabyte_of_arguments_is_an_error_and_is_stored_short(rig: Rig) -> None:  # noqa: F811
    huge = json.dumps({"message_id": "m1", "note": "x" * 1_000_000})
    rig.model.add(_call(huge), Reply("Too long, sorry."))  # type: ignore[arg-type]
    assert await rig.say("delete m1") == ["Too long, sorry."]
    after_call = rig.model.requests[-1]
    tool = [m for m in after_call.messages if m.role == "tool"][-1]
    assert tool.content.startswith("error[bad_arguments]")
    assert f"limit of {MAX_ARGUMENT_CHARS}" in tool.content
    replayed = [c for m in after_call.messages for c in m.tool_calls]
    assert replayed
    assert all(len(c.arguments) < 1_000 for c in replayed)
    assert "chars omitted" in json.loads(replayed[-1].arguments)["arguments_omitted"]
    rig.model.add(Reply("Fine."))
    assert await rig.say("ok") == ["Fine."]
    assert sum(len(m.content) for m in rig.model.requests[-1].messages) < 50_000
    session = await rig.store.find_session(SessionKey(chat_id=CHAT))
    assert session is not None
    stored = [r.body for r in await rig.store.load_path(session.id)]
    calls = [c for b in stored if isinstance(b, AssistantRecord) for c in b.tool_calls]
    assert calls
    assert all(len(c.arguments) < 1_000 for c in calls)


def test_the_depth_scan_skips_strings_and_escapes() -> None:
    assert nesting_depth('{"a": "[[[[\\"[[", "b": [[1]]}') == 3
    assert nesting_depth('"\\\\" [ [') == 2
    assert loads_bounded('{"a": [[1]]}') == {"a": [[1]]}
    try:
        loads_bounded("[" * 200_000 + "]" * 200_000)
    except JsonTooDeep:
        pass
    else:
        raise AssertionError("a 200,000-deep document was decoded")


async def test_a_webhook_body_nested_200000_deep_is_a_400() -> None:
    bot = build_bot("1:offline", "http://127.0.0.1:9")  # never contacted
    server = WebhookServer(Dispatcher(), bot, secret=None, port=0)
    await server.start()
    try:
        async with aiohttp.ClientSession() as http:
            body = '{"update_id": 1, "message": ' + "[" * 200_000 + "]" * 200_000 + "}"
            url = f"http://127.0.0.1:{server.port}{WEBHOOK_PATH}"
            async with http.post(url, data=body, headers={"Content-Type": "application/json"}) as r:
                assert r.status == 400
    finally:
        await server.stop()
        await bot.session.close()

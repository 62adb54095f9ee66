"""Provider faults through the fake OpenAI server and the real OpenAI-compatible client:
bounded retries, exactly one clear message for the user, and the session stays usable."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from adapters.llm.openai_provider import OpenAIProvider
from adapters.llm.scripted import CallTool, Reply, ScriptedModel
from bot.app.wiring import App
from bot.domain.ids import SessionKey
from bot.texts import text
from testkit.fake_server import FakeOpenAIServer
from testkit.memory_store import InMemoryStore
from tests.fakes import RecordingMessenger, SteppingClock, inbound
from tests.rig import rig_settings, wire_app

CHAT = 5001
START = datetime(2026, 11, 30, 6, 0, tzinfo=UTC)
UNAVAILABLE = text("en", "provider")
UNREADABLE = text("en", "bad_response")


@dataclass
class Rig:
    app: App
    store: InMemoryStore
    messenger: RecordingMessenger
    server: FakeOpenAIServer
    model: ScriptedModel
    clock: SteppingClock
    slept: list[float]
    next_id: int = 1

    async def say(self, text: str) -> list[str]:
        """Send a private message; returns what the bot sent back for it."""
        before = len(self.messenger.sent)
        self.clock.advance(30)
        message = inbound(
            chat_id=CHAT, message_id=self.next_id, text=text, at=self.clock.now(),
            chat_type="private",
        )  # fmt: skip
        self.next_id += 1
        await self.app.inbound.on_message(message)
        await self.app.inbound.drain()
        return [m.text for m in self.messenger.sent[before:]]

    async def stored_user_texts(self) -> list[str]:
        session = await self.store.find_session(SessionKey(chat_id=CHAT))
        assert session is not None
        path = await self.store.load_path(session.id)
        return [getattr(r.body, "text", "") for r in path if r.kind == "user"]


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    model = ScriptedModel()
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async with FakeOpenAIServer(model) as server:
        provider = OpenAIProvider(
            server.base_url, "sk-test", timeout=0.5, max_retries=2, sleep=sleep
        )
        store = InMemoryStore()
        messenger = RecordingMessenger()
        clock = SteppingClock(START)
        app = wire_app(
            rig_settings(tmp_path), store=store, messenger=messenger, model=provider, clock=clock
        )
        yield Rig(app, store, messenger, server, model, clock, slept)
        await provider.aclose()


def error(kind: str) -> dict[str, object]:
    return {"error": {"message": "injected", "type": kind, "code": None}}


FAULTS: dict[str, tuple[Callable[[Rig], None], str | None, int]] = {
    # name: (inject, what the user reads (None: the normal answer), provider attempts)
    "429 with Retry-After, then fine": (
        lambda r: r.server.fail_next(429, error("rate_limit_exceeded"), {"Retry-After": "2"}),
        None,
        2,
    ),
    "429 on every attempt": (
        lambda r: r.server.fail_next(429, error("rate_limit_exceeded"), times=3),
        UNAVAILABLE,
        3,
    ),
    "503 twice, then fine": (
        lambda r: r.server.fail_next(503, error("server_error"), times=2),
        None,
        3,
    ),
    "500 on every attempt": (
        lambda r: r.server.fail_next(500, error("server_error"), times=3),
        UNAVAILABLE,
        3,
    ),
    "timeout on every attempt": (
        lambda r: r.server.delay_next(3, times=3),
        UNAVAILABLE,
        3,
    ),
    "malformed JSON body": (
        lambda r: r.server.fail_next(200, "{not json", times=3),
        UNREADABLE,
        2,  # a body that is not JSON is retried once only
    ),
    "an empty reply": (
        lambda r: r.model.add(Reply(""), Reply("")),
        UNREADABLE,
        2,  # read as a bad body: asked once more
    ),
    "a reply that is only an echoed header": (
        lambda r: r.model.add(Reply("[id:m9;user:Helper;time:10:00;]\n")),
        UNREADABLE,
        1,
    ),
}


@pytest.mark.parametrize("fault", list(FAULTS), ids=list(FAULTS))
async def test_a_provider_fault_gives_one_clear_message_and_the_chat_goes_on(
    rig: Rig, fault: str
) -> None:
    inject, expected, attempts = FAULTS[fault]
    inject(rig)
    if expected is None:
        rig.model.add(Reply("Here is your answer."))
    replies = await rig.say("what's the plan?")

    assert replies == [expected or "Here is your answer."]
    assert len(rig.server.requests) == attempts
    if fault.startswith("429 with Retry-After"):
        assert rig.slept == [2.0]  # the provider's wish, not our backoff
    rig.model.add(Reply("Still here."))
    assert await rig.say("are you there?") == ["Still here."]
    assert await rig.stored_user_texts() == ["what's the plan?", "are you there?"]


BAD_CALLS = {
    "arguments are not JSON": '{"message_id": "m1"',
    "arguments are a list": '["m1"]',
    "a number where an alias belongs": '{"message_id": 123456}',
    "a list where one alias belongs": '{"message_id": ["m1"]}',
    "an alias never shown": '{"message_id": "m77"}',
}


@pytest.mark.parametrize("arguments", list(BAD_CALLS.values()), ids=list(BAD_CALLS))
async def test_a_tool_call_with_bad_arguments_becomes_an_error_the_model_reads(
    rig: Rig, arguments: str
) -> None:
    def broken_call(request: object) -> object:
        from bot.domain.messages import ToolCall
        from bot.ports import LLMResponse

        call = ToolCall(id="call_bad", name="delete_message", arguments=arguments)
        return LLMResponse(tool_calls=(call,))

    rig.model.add(broken_call, Reply("I could not delete that."))  # type: ignore[arg-type]
    replies = await rig.say("delete m1 please")

    assert replies == ["I could not delete that."]
    assert rig.messenger.deleted == []
    tool_message = [m for m in rig.model.requests[-1].messages if m.role == "tool"][-1]
    assert tool_message.content.startswith("error[")
    rig.model.add(Reply("Fine."))
    assert await rig.say("ok") == ["Fine."]


async def test_an_unknown_tool_is_an_error_result_not_a_crash(rig: Rig) -> None:
    rig.model.add(CallTool("format_disk", {"really": True}), Reply("I can't do that."))
    assert await rig.say("format the disk") == ["I can't do that."]
    tool_message = rig.model.requests[-1].messages[-1]
    assert tool_message.content.startswith("error[unknown_tool]")

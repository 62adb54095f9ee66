"""Fallback chains in the one model caller: which route takes a call when its own is down,
how long a session stays there, the breaker every chat shares, and what never falls back."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

import pytest

from bot.agent.events import EventBus, ModelCalled
from bot.agent.fallback import FallbackChains, own_reasoning
from bot.agent.model_call import CallReport, ModelCaller, RequestNeeds
from bot.agent.routes import ModelRoute
from bot.context.tokens import RequestTokens
from bot.context.window import RuntimeLimits
from bot.domain.ids import SessionKey
from bot.domain.messages import ChatMessage, Reasoning, ToolCall
from bot.errors import (
    ContextOverflow,
    ProviderError,
    ProviderRateLimited,
    ProviderRejected,
    ProviderUnavailable,
)
from bot.ports import LLMRequest, LLMResponse, SessionInfo, TextSink
from tests.fakes import SteppingClock
from tests.test_agent.rig import START


@dataclass
class Endpoint:
    """A provider that fails with `errors` (in order, one per call) and then answers; it
    keeps every request it got and may stream some text before failing."""

    name: str
    errors: list[ProviderError] = field(default_factory=list)
    stream_first: str = ""
    got: list[LLMRequest] = field(default_factory=list)

    async def complete(
        self, request: LLMRequest, *, on_text: TextSink | None = None
    ) -> LLMResponse:
        self.got.append(request)
        if on_text is not None and self.stream_first:
            await on_text(self.stream_first)
        if self.errors:
            raise self.errors.pop(0)
        return LLMResponse(text=f"answer from {self.name}", stop="end")


class Monotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def route(name: str, provider: Endpoint, window: int = 100_000) -> ModelRoute:
    return ModelRoute(profile=name, model=f"{name}-model", provider=provider, context_window=window)


@dataclass
class Rig:
    main: Endpoint
    backup: Endpoint
    spare: Endpoint
    chains: FallbackChains
    caller: ModelCaller
    calls: list[ModelCalled]
    time: Monotonic
    windows: dict[str, int]

    def route(self, name: str) -> ModelRoute:
        return route(name, getattr(self, name), self.windows.get(name, 100_000))

    async def ask(
        self,
        session: int = 1,
        *,
        messages: tuple[ChatMessage, ...] | None = None,
        on_text: TextSink | None = None,
        purpose: Literal["turn", "compaction"] = "turn",
    ) -> LLMResponse:
        sent = messages or (ChatMessage(role="user", content="hello"),)
        report = CallReport(
            session=SessionInfo(id=session, key=SessionKey(chat_id=-5, thread_id=0), scene="group"),
            turn_id=f"t{len(self.calls)}",
            tokens=RequestTokens(history=0, current=10, images=0, messages=10),
            fixed_tokens=0,
            purpose=purpose,
        )
        return await self.caller.send(
            self.route("main"),
            sent,
            tools=(),
            needs=RequestNeeds(messages=10, schemas=0, images=0),
            report=report,
            current=len(sent) - 1,
            on_text=on_text,
        )

    def routes_called(self) -> list[tuple[str, str | None, bool]]:
        return [(c.route.profile, c.route.fallback_from, c.error is None) for c in self.calls]


def make_rig(cooldown: float = 60.0, windows: dict[str, int] | None = None) -> Rig:
    main, backup, spare = Endpoint("main"), Endpoint("backup"), Endpoint("spare")
    sizes = windows or {}
    time = Monotonic()
    endpoints = {"main": main, "backup": backup, "spare": spare}
    chains = FallbackChains(
        resolve=lambda name: route(name, endpoints[name], sizes.get(name, 100_000)),
        chains={"main": ["backup", "spare"]},
        cooldowns={"main": cooldown, "backup": cooldown, "spare": cooldown},
        now=time,
    )
    bus = EventBus()
    calls: list[ModelCalled] = []

    async def keep(event: ModelCalled) -> None:
        calls.append(event)

    bus.on(ModelCalled, keep)
    caller = ModelCaller(bus=bus, clock=SteppingClock(START), limits=RuntimeLimits(), chains=chains)
    return Rig(main, backup, spare, chains, caller, calls, time, sizes)


DOWN = [
    ProviderUnavailable("HTTP 503: overloaded"),
    ProviderUnavailable("HTTP 529: overloaded_error"),
    ProviderRateLimited("HTTP 429 after 2 retries", retry_after=30),
    ProviderUnavailable("no answer within 30s (ReadTimeout)"),
    ProviderUnavailable("cannot reach http://127.0.0.1:9/v1: ConnectError"),
]


@pytest.mark.parametrize("error", DOWN, ids=lambda e: str(e)[:12])
async def test_a_route_that_is_down_hands_the_call_to_its_fallback(error: ProviderError) -> None:
    rig = make_rig()
    rig.main.errors.append(error)

    answer = await rig.ask()

    assert answer.text == "answer from backup"
    assert rig.routes_called() == [("main", None, False), ("backup", "main", True)]


async def test_a_session_stays_on_the_fallback_for_the_cooldown_then_tries_its_own() -> None:
    rig = make_rig(cooldown=60)
    rig.main.errors.append(ProviderUnavailable("HTTP 503"))
    await rig.ask(session=1)
    rig.calls.clear()

    rig.time.now += 59
    assert (await rig.ask(session=1)).text == "answer from backup"
    assert rig.routes_called() == [("backup", "main", True)]
    # the turn is planned for the fallback from the start while the session stays there
    assert rig.chains.route_for(1, rig.route("main")).profile == "backup"
    assert len(rig.main.got) == 1  # the primary was not asked again

    rig.time.now += 2
    rig.calls.clear()
    assert (await rig.ask(session=1)).text == "answer from main"
    assert rig.routes_called() == [("main", None, True)]
    assert rig.chains.route_for(1, rig.route("main")).profile == "main"


async def test_a_route_failing_repeatedly_is_skipped_by_every_chat_for_its_cooldown() -> None:
    rig = make_rig(cooldown=60)
    rig.main.errors.extend([ProviderUnavailable("HTTP 503"), ProviderUnavailable("HTTP 503")])
    await rig.ask(session=1)
    await rig.ask(session=2)
    rig.calls.clear()

    await rig.ask(session=3)  # a chat that never saw the outage

    assert rig.routes_called() == [("backup", "main", True)]
    assert rig.chains.open_routes() == ("main",)
    rig.time.now += 61
    assert (await rig.ask(session=4)).text == "answer from main"


async def test_the_chain_goes_on_past_a_second_route_that_is_down() -> None:
    rig = make_rig()
    rig.main.errors.append(ProviderUnavailable("HTTP 503"))
    rig.backup.errors.append(ProviderUnavailable("HTTP 502"))

    assert (await rig.ask()).text == "answer from spare"
    assert rig.routes_called() == [
        ("main", None, False),
        ("backup", "main", False),
        ("spare", "main", True),
    ]


async def test_when_every_route_is_down_the_first_failure_is_raised() -> None:
    rig = make_rig()
    rig.main.errors.append(ProviderUnavailable("main is down"))
    rig.backup.errors.append(ProviderUnavailable("backup is down"))
    rig.spare.errors.append(ProviderUnavailable("spare is down"))

    with pytest.raises(ProviderUnavailable, match="main is down"):
        await rig.ask()
    assert len(rig.calls) == 3


@pytest.mark.parametrize(
    "error",
    [
        ProviderRejected("HTTP 400: invalid parameter"),
        ContextOverflow("prompt is too long", limit=1000, requested=2000),
    ],
    ids=["rejected", "overflow"],
)
async def test_a_rejection_or_an_overflow_never_falls_back(error: ProviderError) -> None:
    rig = make_rig()
    rig.main.errors.append(error)

    with pytest.raises(type(error)):
        await rig.ask()
    assert rig.backup.got == []
    assert rig.routes_called() == [("main", None, False)]


async def test_a_call_whose_answer_was_already_shown_never_falls_back() -> None:
    rig = make_rig()
    rig.main.stream_first = "Here is what I fou"
    rig.main.errors.append(ProviderUnavailable("the stream was cut (RemoteProtocolError)"))
    shown: list[str] = []

    async def draft(text: str) -> None:
        shown.append(text)

    with pytest.raises(ProviderUnavailable):
        await rig.ask(on_text=draft)
    assert rig.backup.got == []
    assert shown == ["Here is what I fou"]


async def test_a_fallback_whose_window_is_too_small_is_passed_over() -> None:
    rig = make_rig(windows={"backup": 5})
    rig.main.errors.append(ProviderUnavailable("HTTP 503"))

    assert (await rig.ask()).text == "answer from spare"
    assert rig.backup.got == []
    assert [c.route.profile for c in rig.calls] == ["main", "backup", "spare"]
    assert type(rig.calls[1].error).__name__ == "CapacityExceeded"


async def test_the_fallback_gets_no_reasoning_of_another_model() -> None:
    rig = make_rig()
    rig.main.errors.append(ProviderUnavailable("HTTP 503"))
    deepseek = Reasoning(format="reasoning_content", text="deep thoughts", model="main-model")
    step = ChatMessage(
        role="assistant",
        content="",
        tool_calls=(ToolCall(id="c1", name="search"),),
        reasoning=deepseek,
    )
    messages = (
        ChatMessage(role="user", content="look it up"),
        step,
        ChatMessage(role="tool", content="found", tool_call_id="c1"),
    )

    await rig.ask(messages=messages)

    assert rig.main.got[0].messages[1].reasoning == deepseek  # its own model keeps it
    assert [m.reasoning for m in rig.backup.got[0].messages] == [None, None, None]
    assert rig.backup.got[0].messages[1].tool_calls == step.tool_calls


def test_own_reasoning_keeps_a_model_its_reasoning_and_unmarked_reasoning() -> None:
    mine = Reasoning(format="anthropic", payload="[]", model="claude")
    unmarked = Reasoning(format="reasoning_content", text="old")
    messages = (
        ChatMessage(role="assistant", content="a", reasoning=mine),
        ChatMessage(role="assistant", content="b", reasoning=unmarked),
    )
    assert own_reasoning(messages, "claude") == messages
    stripped = own_reasoning(messages, "deepseek-chat")
    assert stripped[0] == replace(messages[0], reasoning=None, tokens=stripped[0].tokens)
    assert stripped[1].reasoning == unmarked


async def test_a_summary_call_falls_back_like_a_turn_call() -> None:
    rig = make_rig()
    rig.main.errors.append(ProviderUnavailable("HTTP 503"))

    assert (await rig.ask(purpose="compaction")).text == "answer from backup"
    assert [(c.route.profile, c.purpose) for c in rig.calls] == [
        ("main", "compaction"),
        ("backup", "compaction"),
    ]


async def test_a_stay_on_a_fallback_too_small_for_the_request_goes_on_down_the_chain() -> None:
    rig = make_rig(windows={"backup": 5})
    rig.chains.answered(1, replace(rig.route("backup"), fallback_from="main"))  # staying there

    assert (await rig.ask(session=1)).text == "answer from spare"
    assert [c.route.profile for c in rig.calls] == ["backup", "spare"]
    assert rig.main.got == []

"""Real turns against fakes that think and refuse, as their providers do, a request that
does not give the reasoning back: DeepSeek V4 on chat completions and on its Anthropic
endpoint, Claude with adaptive thinking, Gemini 3 with thought signatures. A private chat
with a 3-round tool loop, then five more turns (two with tool loops): every turn answered,
no provider 400, the kept reasoning on the wire where the provider wants it and nowhere a
member reads."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from adapters.llm.anthropic_provider import AnthropicProvider
from adapters.llm.openai_provider import OpenAIProvider
from adapters.llm.provider_defaults import options_for
from adapters.llm.scripted import CallTool, Reply, ScriptedModel, Step
from bot.domain.records import AssistantRecord
from testkit.fake_anthropic import FakeAnthropicServer
from testkit.fake_reasoning import (
    ClaudeThinking,
    DeepSeekAnthropicThinking,
    DeepSeekThinking,
    GeminiThinking,
    ThinkingModel,
)
from testkit.fake_server import FakeOpenAIServer
from testkit.memory_store import InMemoryStore
from tests.fakes import RecordingMessenger, SteppingClock, inbound
from tests.rig import rig_settings, wire_app
from tests.test_agent.rig import START

CHAT = 4242


@dataclass(frozen=True)
class Provider:
    name: str
    real_url: str
    kind: str
    thinking: Callable[[], ThinkingModel]


PROVIDERS = [
    Provider("deepseek-v4", "https://api.deepseek.com", "openai", DeepSeekThinking),
    Provider(
        "deepseek-v4-anthropic",
        "https://api.deepseek.com/anthropic",
        "anthropic",
        DeepSeekAnthropicThinking,
    ),
    Provider("claude-adaptive", "https://api.anthropic.com", "anthropic", ClaudeThinking),
    Provider(
        "gemini-3",
        "https://generativelanguage.googleapis.com/v1beta/openai",
        "openai",
        GeminiThinking,
    ),
]


def inspect(n: int) -> CallTool:
    return CallTool("inspect_conversation_reference", {"reference": f"m{n}"})


SCRIPT: list[Step] = [
    inspect(1),
    inspect(1),
    inspect(1),
    Reply("Looked three times."),
    Reply("Second answer."),
    inspect(2),
    Reply("Third answer, after a look."),
    Reply("Fourth answer."),
    (inspect(1), inspect(2)),
    inspect(3),
    Reply("Fifth answer, after two steps."),
    Reply("Sixth answer."),
]
ANSWERS = [
    "Looked three times.",
    "Second answer.",
    "Third answer, after a look.",
    "Fourth answer.",
    "Fifth answer, after two steps.",
    "Sixth answer.",
]


async def _run(provider: Provider, tmp_path: Path) -> tuple[Any, ThinkingModel, Any, Any]:
    scripted = ScriptedModel(SCRIPT)
    thinking = provider.thinking()
    options = options_for(provider.real_url, kind=provider.kind, reasoning="high")  # type: ignore[arg-type]
    server: FakeOpenAIServer
    if provider.kind == "anthropic":
        server = FakeAnthropicServer(scripted, thinking=thinking)
    else:
        server = FakeOpenAIServer(scripted, thinking=thinking)
    messenger = RecordingMessenger()
    store = InMemoryStore()
    async with server:
        adapter = AnthropicProvider if provider.kind == "anthropic" else OpenAIProvider
        client = adapter(server.base_url, "k", max_retries=0, options=options)
        try:
            settings = rig_settings(tmp_path, owner_id=42, llm_model="claude-opus-4-7")
            clock = SteppingClock(START)
            app = wire_app(settings, store=store, messenger=messenger, model=client, clock=clock)
            for n, _ in enumerate(ANSWERS):
                clock.advance(40)
                message = inbound(
                    chat_id=CHAT,
                    chat_type="private",
                    message_id=10 + n,
                    text=f"question {n}",
                    at=clock.now(),
                )
                await app.inbound.on_message(message)
                await app.inbound.drain()
        finally:
            await client.aclose()
    return server, thinking, messenger, store


@pytest.mark.parametrize("provider", PROVIDERS, ids=[p.name for p in PROVIDERS])
async def test_every_turn_of_a_thinking_model_is_answered_without_a_400(
    provider: Provider, tmp_path: Path
) -> None:
    server, thinking, messenger, store = await _run(provider, tmp_path)
    assert thinking.refused == []
    assert [m.text for m in messenger.sent] == ANSWERS
    assert len(server.requests) == 12
    # the reasoning the model gave never reaches the chat
    assert not any("think" in m.text.lower() or "thought" in m.text for m in messenger.sent)
    # the stored tool-call records keep it, for the next call and a restart
    (session,) = await store.list_sessions()
    records = [
        r.body
        for r in await store.load_path(session.id)
        if isinstance(r.body, AssistantRecord) and r.body.tool_calls
    ]
    assert len(records) == 6
    assert all(record.reasoning is not None for record in records)


@pytest.mark.parametrize("provider", PROVIDERS, ids=[p.name for p in PROVIDERS])
async def test_a_tool_turns_reasoning_goes_back_byte_for_byte_on_every_later_call(
    provider: Provider, tmp_path: Path
) -> None:
    """The first loop's reasoning is in the last request exactly as the provider gave it,
    and every request repeats the one before it as a prefix (the cache holds)."""
    server, _, _, _ = await _run(provider, tmp_path)
    start = 1 if provider.kind == "anthropic" else 2  # after the system prompt, question 0
    first_loop = _unmarked(server.requests[3]["messages"][start : start + 6])
    last = _unmarked(server.requests[-1]["messages"][start : start + 6])
    assert first_loop == last
    text = json.dumps(last)
    assert any(mark in text for mark in ("Let me think", "thought #", "thought_signature"))


def _unmarked(messages: Any) -> Any:
    if isinstance(messages, list):
        return [_unmarked(item) for item in messages]
    if isinstance(messages, dict):
        return {k: _unmarked(v) for k, v in messages.items() if k != "cache_control"}
    return messages


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_tool_turn_stored_without_reasoning_does_not_break_deepseek(
    kind: str, tmp_path: Path
) -> None:
    """A chat whose tool turn was stored before reasoning was kept (or by another model)
    keeps working when DeepSeek starts thinking: the turn goes back with an empty
    reasoning, which DeepSeek takes, instead of a refusal on every later call."""
    scripted = ScriptedModel([inspect(1), Reply("First."), inspect(1), Reply("Second.")])
    url = "https://api.deepseek.com" + ("/anthropic" if kind == "anthropic" else "")
    options = options_for(url, kind=kind)  # type: ignore[arg-type]
    server = FakeAnthropicServer(scripted) if kind == "anthropic" else FakeOpenAIServer(scripted)
    messenger = RecordingMessenger()
    async with server:
        adapter = AnthropicProvider if kind == "anthropic" else OpenAIProvider
        client = adapter(server.base_url, "k", max_retries=0, options=options)
        try:
            settings = rig_settings(tmp_path, owner_id=42, llm_model="deepseek-v4-flash")
            clock = SteppingClock(START)
            app = wire_app(
                settings, store=InMemoryStore(), messenger=messenger, model=client, clock=clock
            )
            for n, thinking in enumerate(
                (None, DeepSeekAnthropicThinking() if kind == "anthropic" else DeepSeekThinking())
            ):
                server.thinking = thinking  # the model starts thinking after the first turn
                clock.advance(40)
                message = inbound(
                    chat_id=CHAT, chat_type="private", message_id=n + 1, text="q", at=clock.now()
                )
                await app.inbound.on_message(message)
                await app.inbound.drain()
        finally:
            await client.aclose()
    assert [m.text for m in messenger.sent] == ["First.", "Second."]
    assert server.thinking is not None
    assert server.thinking.refused == []

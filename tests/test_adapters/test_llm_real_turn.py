"""Real turns of the bot through the native Anthropic adapter and a fake Messages API: what
the request builder makes (system prompt, history, tool calls and results, the current
message) is valid for the API, and the reply reaches the chat."""

from __future__ import annotations

import json
from pathlib import Path

from adapters.llm.anthropic_provider import AnthropicProvider
from adapters.llm.scripted import CallTool, Reply, ScriptedModel
from testkit.fake_anthropic import FakeAnthropicServer
from testkit.memory_store import InMemoryStore
from tests.fakes import RecordingMessenger, SteppingClock
from tests.rig import rig_settings, wire_app
from tests.test_agent.rig import START, say

KEY = "sk-ant-turn-test-key"


async def test_two_turns_with_a_failing_tool_over_the_messages_api(tmp_path: Path) -> None:
    scripted = ScriptedModel(
        [CallTool("delete_message", {"message_id": "m999"}), Reply("I could not."), Reply("Hi!")]
    )
    messenger = RecordingMessenger()
    async with FakeAnthropicServer(scripted, api_key=KEY) as server:
        provider = AnthropicProvider(server.base_url, KEY, max_retries=0)
        try:
            settings = rig_settings(tmp_path, owner_id=42)
            clock = SteppingClock(START)
            app = wire_app(
                settings, store=InMemoryStore(), messenger=messenger, model=provider, clock=clock
            )
            await say(app, clock, 7, "@Helper delete m999", mentions_bot=True)
            await say(app, clock, 8, "@Helper hello again", mentions_bot=True)
        finally:
            await provider.aclose()
    assert len(server.requests) == 3
    assert all("system" in body for body in server.requests)
    last = server.requests[-1]["messages"]
    kinds = [block["type"] for message in last for block in message["content"]]
    assert "tool_use" in kinds
    assert "tool_result" in kinds
    results = [b for m in last for b in m["content"] if b["type"] == "tool_result"]
    assert results[0]["is_error"] is True
    assert results[0]["content"].count("error[") == 1
    assert len(server.reported) == 3
    assert [m.text for m in messenger.sent] == ["I could not.", "Hi!"]
    assert scripted.requests[-1].messages[-1].role == "user"


async def test_the_ledger_carries_the_cache_reads_and_writes_the_messages_api_reported(
    tmp_path: Path,
) -> None:
    """Turns over the native adapter with breakpoints: the fake Messages API caches what the
    plan marks and reports reads and writes in Anthropic's usage shape; every ledger line
    says exactly that (input = uncached + reads + writes)."""
    scripted = ScriptedModel()  # echoes: any answer will do
    messenger = RecordingMessenger()
    async with FakeAnthropicServer(scripted, api_key=KEY) as server:
        provider = AnthropicProvider(server.base_url, KEY, max_retries=0)
        try:
            settings = rig_settings(tmp_path, owner_id=42)
            clock = SteppingClock(START)
            app = wire_app(
                settings, store=InMemoryStore(), messenger=messenger, model=provider, clock=clock
            )
            for n in range(4):
                await say(
                    app, clock, 10 + n, f"@Helper note {n}: " + "words " * 400, mentions_bot=True
                )
        finally:
            await provider.aclose()
    marked = [
        block
        for body in server.requests
        for message in body["messages"]
        for block in message["content"]
        if "cache_control" in block
    ]
    assert marked, "the cache plan reached the wire as cache_control"
    lines = [
        json.loads(line)
        for path in sorted(settings.traces_dir.glob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]
    turns = [line for line in lines if line.get("purpose", "turn") == "turn"]
    assert len(turns) == len(server.reported) == 4
    for line, usage in zip(turns, server.reported, strict=True):
        assert line["input_tokens"] == usage.input_tokens
        assert line["cached_tokens"] == usage.cached_tokens
        assert line["cache_write_tokens"] == usage.cache_write_tokens
    assert sum(u.cache_write_tokens for u in server.reported) > 0
    assert sum(u.cached_tokens for u in server.reported) > 0  # what was written is read

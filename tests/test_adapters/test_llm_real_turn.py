"""Real turns of the bot through the native Anthropic adapter and a fake Messages API: what
the request builder makes (system prompt, history, tool calls and results, the current
message) is valid for the API, and the reply reaches the chat."""

from __future__ import annotations

from pathlib import Path

from adapters.llm.fake_anthropic import FakeAnthropicServer
from adapters.llm.openai_provider import AnthropicProvider
from adapters.llm.scripted import CallTool, Reply, ScriptedModel
from storage.memory import InMemoryStore
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

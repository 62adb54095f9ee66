"""The answer at the iteration cap: the same tools with `tool_choice: none`, so its request
starts with the previous request byte for byte (the tool schemas lead every provider's
cached prefix); a model that still calls a tool there gets no further step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adapters.llm.anthropic_provider import AnthropicProvider
from adapters.llm.openai_provider import OpenAIProvider
from adapters.llm.scripted import CallTool, Reply, ScriptedModel, Step
from bot.agent.provider_call import FINAL_CALL_NOTE
from bot.ports import LLMProvider
from bot.texts import text as user_text
from testkit.fake_anthropic import FakeAnthropicServer
from testkit.fake_server import FakeOpenAIServer
from testkit.memory_store import InMemoryStore
from tests.fakes import RecordingMessenger, SteppingClock
from tests.rig import rig_settings, wire_app
from tests.test_agent.rig import START, say

KEY = "sk-ant-final-call-key"


def capped_script(last: Step) -> ScriptedModel:
    """Two tool steps (the cap is 2), then `last` for the final call."""
    step = CallTool("delete_message", {"message_id": "m999"})
    return ScriptedModel([step, step, last])


async def run_turn(tmp_path: Path, model: LLMProvider) -> RecordingMessenger:
    messenger = RecordingMessenger()
    settings = rig_settings(tmp_path, owner_id=42, runtime={"max_tool_iterations": 2})
    clock = SteppingClock(START)
    app = wire_app(settings, store=InMemoryStore(), messenger=messenger, model=model, clock=clock)
    await say(app, clock, 7, "@Helper delete m999 twice", mentions_bot=True)
    return messenger


def without_markers(value: Any) -> Any:
    """A body part without its `cache_control` markers (they are not part of the prefix)."""
    if isinstance(value, dict):
        return {k: without_markers(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [without_markers(v) for v in value]
    return value


async def test_the_final_call_repeats_the_previous_request_and_reads_it_from_the_cache(
    tmp_path: Path,
) -> None:
    async with FakeOpenAIServer(capped_script(Reply("done")), cache="auto") as server:
        provider = OpenAIProvider(server.base_url, None, max_retries=0)
        try:
            messenger = await run_turn(tmp_path, provider)
        finally:
            await provider.aclose()
    assert len(server.requests) == 3
    first, previous, final = server.requests
    assert final["tools"] == previous["tools"] == first["tools"]
    assert final["tool_choice"] == "none"
    assert "tool_choice" not in previous
    assert final["messages"][: len(previous["messages"])] == previous["messages"]
    assert final["messages"][-1] == {"role": "user", "content": FINAL_CALL_NOTE}
    # an automatic prefix cache reads all of the previous request on the final call
    before, last = server.reported[1], server.reported[2]
    assert before is not None
    assert last is not None
    assert last.cached_tokens >= before.input_tokens
    assert [m.text for m in messenger.sent] == ["done"]


async def test_over_the_messages_api_the_final_call_shares_the_tools_and_system_prompt(
    tmp_path: Path,
) -> None:
    """Anthropic keys message blocks by tool_choice: the final call reads the tools and the
    system prompt, and marks nothing in the conversation (no write nobody reads)."""
    async with FakeAnthropicServer(capped_script(Reply("done")), api_key=KEY) as server:
        provider = AnthropicProvider(server.base_url, KEY, max_retries=0)
        try:
            messenger = await run_turn(tmp_path, provider)
        finally:
            await provider.aclose()
    assert len(server.requests) == 3
    _, previous, final = server.requests
    assert final["tool_choice"] == {"type": "none"}
    assert "tool_choice" not in previous
    assert final["tools"] == previous["tools"]
    assert without_markers(final["system"]) == without_markers(previous["system"])
    count = len(previous["messages"])
    assert without_markers(final["messages"][:count]) == without_markers(previous["messages"])
    marked = [b for m in final["messages"] for b in m["content"] if "cache_control" in b]
    assert marked == []
    assert "cache_control" in final["system"][-1]
    last = server.reported[2]
    assert last is not None
    assert last.cached_tokens > 0  # the tools and the system prompt
    assert last.cache_write_tokens == 0
    assert [m.text for m in messenger.sent] == ["done"]


async def test_a_model_that_calls_a_tool_at_the_cap_ends_the_turn_without_another_step(
    tmp_path: Path,
) -> None:
    """A provider that ignores tool_choice none (the scripted model here): its call is not
    run, no further call is made, the chat is told the turn failed."""
    model = capped_script(CallTool("delete_message", {"message_id": "m998"}))
    messenger = await run_turn(tmp_path, model)
    assert len(model.requests) == 3
    assert [r.tool_choice for r in model.requests] == [None, None, "none"]
    assert [m.text for m in messenger.sent] == [user_text("en", "bad_response")]

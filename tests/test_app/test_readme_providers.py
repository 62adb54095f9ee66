"""The README's "Models that think" configs work: each block is loaded as the operator would
write it, wired by `build_provider` with its host's defaults, and answers one turn with a
tool loop against the fake of its provider (which refuses what the real one refuses)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from adapters.llm.scripted import CallTool, Reply, ScriptedModel
from bot.app.model_routes import build_provider
from bot.config import load_settings
from testkit.fake_anthropic import FakeAnthropicServer
from testkit.fake_reasoning import ClaudeThinking, DeepSeekThinking, OllamaThinking
from testkit.fake_server import FakeOpenAIServer
from testkit.memory_store import InMemoryStore
from tests.fakes import RecordingMessenger, SteppingClock, inbound
from tests.rig import rig_settings, wire_app
from tests.test_agent.rig import START

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"<!-- provider: (\w+) -->\n```toml\n(.*?)```", re.DOTALL)
BLOCKS = dict(BLOCK.findall(README.read_text(encoding="utf-8")))


def _fake(name: str, model: ScriptedModel) -> FakeOpenAIServer:
    if name == "claude":
        return FakeAnthropicServer(model, thinking=ClaudeThinking())
    if name == "deepseek":
        return FakeOpenAIServer(model, thinking=DeepSeekThinking())
    if name == "ollama":
        return FakeOpenAIServer(model, thinking=OllamaThinking())
    return FakeOpenAIServer(model)  # OpenAI: the reasoning stays hidden


def test_the_readme_shows_the_four_configs() -> None:
    assert sorted(BLOCKS) == ["claude", "deepseek", "ollama", "openai"]


@pytest.mark.parametrize("name", sorted(BLOCKS))
async def test_each_readme_config_answers_a_tool_loop_against_its_fake(
    name: str, tmp_path: Path
) -> None:
    config = tmp_path / "bot.toml"
    config.write_text(BLOCKS[name], encoding="utf-8")
    (profile,) = load_settings(config).providers.values()
    real = build_provider(profile, "key", timeout=10, max_retries=0)
    await real.aclose()
    scripted = ScriptedModel(
        [CallTool("inspect_conversation_reference", {"reference": "m1"}), Reply("Checked.")]
    )
    messenger = RecordingMessenger()
    async with _fake(name, scripted) as server:
        client = type(real)(server.base_url, "key", max_retries=0, options=real.options)
        try:
            settings = rig_settings(tmp_path, owner_id=42, llm_model=profile.model)
            clock = SteppingClock(START)
            app = wire_app(
                settings, store=InMemoryStore(), messenger=messenger, model=client, clock=clock
            )
            clock.advance(40)
            await app.inbound.on_message(
                inbound(chat_id=77, chat_type="private", message_id=1, text="check", at=clock.now())
            )
            await app.inbound.drain()
        finally:
            await client.aclose()
    assert [m.text for m in messenger.sent] == ["Checked."]
    assert server.thinking is None or server.thinking.refused == []
    first, second = server.requests
    expected: dict[str, dict[str, Any]] = {
        "deepseek": {"thinking": {"type": "enabled"}, "reasoning_effort": "high"},
        "claude": {"thinking": {"type": "adaptive"}, "output_config": {"effort": "medium"}},
        "openai": {"reasoning_effort": "low"},
        "ollama": {"keep_alive": "30m"},
    }
    assert {k: first.get(k) for k in expected[name]} == expected[name]
    sent_back = json.dumps(second["messages"])
    replayed = {
        "deepseek": "reasoning_content",
        "claude": '"signature"',
        "ollama": '"reasoning"',
        "openai": "tool_calls",
    }
    assert replayed[name] in sent_back

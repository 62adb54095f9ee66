"""Issue 35: the window and the request's size a provider's overflow body states are read
from it (`ContextOverflow.limit` / `requested`), so a recovery stays under what was refused.
Bodies are the recorded ones under tests/fixtures/llm/ (each with its source)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adapters.llm.provider_errors import classify_error, error_in_body
from bot.agent.call_retries import overflow_room
from bot.errors import ContextOverflow

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "llm"
STATED = {
    "anthropic/overflow": (200_000, 208_310),
    "deepseek/overflow": (131_072, 140_321),
    "gemini/overflow": (1_048_576, 1_211_051),
    "llamacpp/overflow": (4_096, 4_476),
    "moonshot/overflow": (262_144, 291_351),
    "ollama/overflow": (None, None),  # "longer than the context length": no figures
    "openai/overflow": (128_000, 131_204),
    "openrouter/overflow": (200_000, 231_566),
    "openrouter/overflow_in_200": (200_000, 204_981),
    "qwen/overflow": (129_024, None),
    "vllm/overflow": (32_768, 33_792),
    "xai/overflow": (131_072, 153_255),
}


def test_every_recorded_overflow_body_is_listed() -> None:
    found = {f"{p.parent.name}/{p.stem}" for p in FIXTURES.glob("*/overflow*.json")}
    assert found == set(STATED)


@pytest.mark.parametrize(("name", "stated"), STATED.items())
def test_the_stated_window_and_size_are_read(
    name: str, stated: tuple[int | None, int | None]
) -> None:
    fixture = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    status, body = fixture["status"], fixture["body"]
    error = error_in_body(body) if status == 200 else classify_error(status, json.dumps(body))
    assert isinstance(error, ContextOverflow)
    assert (error.limit, error.requested) == stated


def test_the_room_after_an_overflow_never_reaches_what_was_refused() -> None:
    # our count of the refused request is scaled by the provider's own ratio
    assert overflow_room(ContextOverflow("x", limit=4_096, requested=4_476), 3_000) == 2_745
    # a window alone (Qwen) bounds it; our count when the window is larger
    assert overflow_room(ContextOverflow("x", limit=2_000), 3_000) == 2_000
    assert overflow_room(ContextOverflow("x", limit=129_024), 3_000) == 3_000
    # no figures (Ollama): what was refused
    assert overflow_room(ContextOverflow("x"), 3_000) == 3_000

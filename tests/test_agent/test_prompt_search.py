"""The system prompt tells the model when to search the chat's history, in its locale."""

from __future__ import annotations

import pytest

from bot.agent.system_prompt import PromptFacts, build_system_prompt
from bot.domain.ids import Locale
from bot.tools import default_tools


@pytest.mark.parametrize(
    ("locale", "words"), [("en", "call search_history"), ("zh", "调用 search_history")]
)
def test_the_prompt_says_when_to_search(locale: Locale, words: str) -> None:
    names = tuple(tool.spec.name for tool in default_tools())
    assert "search_history" in names
    prompt = build_system_prompt(
        PromptFacts(bot_name="Helper", scene="group", locale=locale, tool_names=names)
    )
    assert words in prompt


def test_no_search_hint_without_the_tool() -> None:
    prompt = build_system_prompt(
        PromptFacts(bot_name="Helper", scene="group", locale="en", tool_names=("send_message",))
    )
    assert "search_history" not in prompt

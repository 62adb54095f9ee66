"""The tool schemas' cost: compact JSON, non-ASCII kept as written, estimated as text."""

from __future__ import annotations

import pytest

from bot.context.tool_schema_cost import estimate_tool_schema_tokens, tool_schema_text


def test_no_tools_cost_nothing() -> None:
    assert tool_schema_text([]) == ""


@pytest.mark.parametrize(
    ("tools", "tokens"),
    [
        ([], 0),
        ([{"name": "f"}], 4),
        ([{"name": "f", "description": "查找"}], 10),
    ],
    ids=["none", "compact json", "CJK counted per character"],
)
def test_estimate_tool_schema_tokens(tools: list[dict[str, object]], tokens: int) -> None:
    assert estimate_tool_schema_tokens(tools) == tokens

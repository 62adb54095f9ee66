"""What a request's tool schemas cost: their text as costed, and its token estimate.

The window's capacity check (`bot.context.window.check_capacity`) and the request's fixed
cost (`bot.agent.request`) take the schemas' estimate from here; a route with a real
tokenizer counts the same text (`bot.agent.model_call`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from bot.context.tokens import estimate_text_tokens


def tool_schema_text(tools: Sequence[Mapping[str, object]]) -> str:
    """The tool schemas as costed: compact JSON, non-ASCII kept as written ("" for none)."""
    if not tools:
        return ""
    return json.dumps(
        [dict(tool) for tool in tools], ensure_ascii=False, separators=(",", ":"), default=str
    )


def estimate_tool_schema_tokens(tools: Sequence[Mapping[str, object]]) -> int:
    """The estimate of the tool schemas as sent (compact JSON, non-ASCII kept as written)."""
    return estimate_text_tokens(tool_schema_text(tools))

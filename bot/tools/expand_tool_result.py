"""expand_tool_result: bring back, in full, an old tool result that history shows shortened."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.domain.records import ToolResultsRecord
from bot.errors import ToolError
from bot.ports import ToolSpec
from bot.tools.base import Tool, ToolContext, require_str

MAX_CHARS = 20_000


async def expand_tool_result(args: Mapping[str, Any], ctx: ToolContext) -> str:
    call_id = require_str(args, "tool_call_id", max_len=200)
    for record in reversed(ctx.records):
        if isinstance(record.body, ToolResultsRecord):
            for result in record.body.results:
                if result.call_id == call_id:
                    content = result.content
                    if len(content) > MAX_CHARS:
                        omitted = len(content) - MAX_CHARS
                        content = content[:MAX_CHARS] + f"\n[... {omitted} characters more ...]"
                    return content
    raise ToolError(f"no stored result for tool call {call_id!r} in this conversation", "not_found")


TOOL = Tool(
    spec=ToolSpec(
        name="expand_tool_result",
        description=(
            "Return the full text of an earlier tool result that the history shows shortened "
            "(marked '…(N chars omitted)'). Pass that call's tool_call_id."
        ),
        parameters={
            "type": "object",
            "properties": {"tool_call_id": {"type": "string"}},
            "required": ["tool_call_id"],
        },
    ),
    run=expand_tool_result,
    summary="expand_tool_result(tool_call_id) — an old tool result in full",
)

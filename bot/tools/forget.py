"""forget: drop one kept fact of this chat by its id (`f3`), with the rights of the member who
asked: their own facts; the chat's for its administrators and the owner (the member of a
private chat owns it); anyone's here for the owner. A fact of another chat is unknown here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from bot.context.memory_block import MemoryFact, fact_alias, parse_fact_alias
from bot.errors import ToolError
from bot.ports import ToolSpec
from bot.tools.base import Tool, ToolContext
from bot.tools.rights import MemberRights


async def may_forget(fact: MemoryFact, rights: MemberRights) -> bool:
    """Whether the member of `rights` may have `fact` (of its chat) forgotten."""
    requester = rights.requester_id
    if requester is None:
        return False
    if fact.member_id == requester:
        return True
    if rights.owner_id is not None and requester == rights.owner_id:
        return True
    if fact.about_chat:
        return fact.chat_id == requester or await rights.requester_privileged(fact.chat_id)
    return False


async def forget(args: Mapping[str, Any], ctx: ToolContext) -> str:
    memory = ctx.memory
    if memory is None:
        raise ToolError("memory is not available here", code="unavailable")
    raw = args.get("memory")
    fact_id = parse_fact_alias(raw) if isinstance(raw, str) else None
    if fact_id is None:
        raise ToolError(
            "argument 'memory' must be a fact id from the [Memory] block, such as f3",
            code="bad_arguments",
        )
    fact = await memory.find_fact(ctx.chat_id, fact_id)
    if fact is None:
        raise ToolError(f"no memory {fact_alias(fact_id)} in this chat", code="unknown_memory")
    if ctx.rights is None or not await may_forget(fact, ctx.rights):
        raise ToolError(
            f"not allowed: {fact.alias} is "
            + ("the chat's memory" if fact.about_chat else "another member's memory")
            + "; members may forget only their own facts",
            code="not_allowed",
        )
    await memory.delete_facts(ctx.chat_id, [fact_id])
    ctx.forgotten.add(fact_id)
    return json.dumps({"forgotten": fact.alias})


TOOL = Tool(
    spec=ToolSpec(
        name="forget",
        description=(
            "Forget one kept fact of this chat by its id from the [Memory] block (e.g. f3), "
            "when the member asks you to or it is no longer true. Members may forget their "
            "own facts; the chat's facts only its administrators and the owner."
        ),
        parameters={
            "type": "object",
            "properties": {"memory": {"type": "string", "description": "fact id, e.g. f3"}},
            "required": ["memory"],
        },
    ),
    run=forget,
    summary="forget(memory) — drop a kept fact by its id f<n>",
)

"""remember: keep a fact the member asked to be kept, about them or about the chat, in this
chat only (docs/architecture.md, Memory).

A fact about a member is keyed by (this chat, the member who triggered the turn): the tool
takes no member argument, so nobody can have a fact kept about someone else; it is shown only
in turns of this chat, so what is learnt in a private chat stays there and the owner's private
facts never reach a group. A fact about the chat (`about="chat"`) is written only by the
chat's administrators and the owner (asked from Telegram, as for deleting others' messages),
or by the member of a private chat. Caps per member, per chat and per fact (`[memory]`) are
tool errors the model reads. The call is stored with the fact's id, not its text
(`stored_call`), so once forgotten the fact leaves no copy in later requests.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from bot.context.memory_block import CHAT_WIDE, MemoryFact
from bot.domain.messages import ToolCall
from bot.domain.records import ToolResult
from bot.errors import ToolError
from bot.ports import ToolSpec
from bot.tools.base import Tool, ToolContext

ABOUT = ("me", "chat")
KEPT_AS = "[kept as {alias}]"


def _fact_text(args: Mapping[str, Any], max_chars: int) -> str:
    fact = args.get("fact")
    if not isinstance(fact, str) or not fact.strip():
        raise ToolError(
            "argument 'fact' is empty: write the fact to keep, in a short sentence",
            code="bad_arguments",
        )
    fact = " ".join(fact.split())
    if len(fact) > max_chars:
        raise ToolError(
            f"not kept: the fact is {len(fact)} characters, over the limit of {max_chars}; "
            "keep only what matters, in a shorter sentence",
            code="too_long",
        )
    return fact


def _about(args: Mapping[str, Any]) -> str:
    about = args.get("about", "me")
    if about is None:
        return "me"
    if about not in ABOUT:
        raise ToolError(
            f"argument 'about' is {about!r}: it must be 'me' (the member who asked) or "
            "'chat' (this chat); a fact about another member cannot be kept",
            code="bad_arguments",
        )
    return str(about)


async def remember(args: Mapping[str, Any], ctx: ToolContext) -> str:
    memory, limits = ctx.memory, ctx.memory_limits
    if memory is None:
        raise ToolError("memory is not available here", code="unavailable")
    fact = _fact_text(args, limits.max_fact_chars)
    about = _about(args)
    requester = None if ctx.rights is None else ctx.rights.requester_id
    if ctx.rights is None or requester is None:
        raise ToolError("not allowed: no member asked in this turn", code="not_allowed")
    member_id = requester
    if about == "chat":
        member_id = CHAT_WIDE
        own_private_chat = ctx.chat_id == requester
        if not own_private_chat and not await ctx.rights.requester_privileged(ctx.chat_id):
            raise ToolError(
                "not allowed: only the chat's administrators and the owner may keep a fact "
                "about the chat; the member may keep it about themselves (about='me')",
                code="not_allowed",
            )
    added = await memory.add_fact(
        chat_id=ctx.chat_id,
        member_id=member_id,
        author_id=requester,
        text=fact,
        created_at=ctx.clock.now(),
        per_member=limits.per_member,
        per_chat=limits.per_chat,
    )
    if added == "per_member":
        raise ToolError(
            f"not kept: this member already has {limits.per_member} facts in this chat; "
            "forget one first (/memory lists them)",
            code="memory_full",
        )
    if added == "per_chat":
        raise ToolError(
            f"not kept: this chat already keeps {limits.per_chat} facts; forget one first",
            code="memory_full",
        )
    return _kept(added, about)


def _kept(fact: MemoryFact, about: str) -> str:
    return json.dumps({"remembered": fact.alias, "about": about})


def stored_call(call: ToolCall, result: ToolResult) -> ToolCall:
    """The call as stored: a kept fact's text replaced by its id (it lives in the `[Memory]`
    block while it exists, and nowhere in the history)."""
    if result.is_error:
        return call
    try:
        kept = json.loads(result.content)
        arguments = json.loads(call.arguments)
    except ValueError:
        return call
    if not isinstance(kept, dict) or not isinstance(arguments, dict):
        return call
    alias = str(kept.get("remembered", ""))
    stored = {"fact": KEPT_AS.format(alias=alias), "about": kept.get("about", "me")}
    return ToolCall(id=call.id, name=call.name, arguments=json.dumps(stored))


TOOL = Tool(
    spec=ToolSpec(
        name="remember",
        description=(
            "Keep a short fact a member asked you to remember (a name to call them, a diet, "
            "the chat's stand-up time). about='me': about the member who asked, shown only "
            "in this chat when they talk to you; about='chat': about this chat (its "
            "administrators and the owner only). Never keep a fact about another member. "
            "Kept facts appear in the [Memory] block with ids f<n>."
        ),
        parameters={
            "type": "object",
            "properties": {
                "fact": {"type": "string", "description": "the fact, one short sentence"},
                "about": {"type": "string", "enum": list(ABOUT)},
            },
            "required": ["fact"],
        },
    ),
    run=remember,
    summary="remember(fact, about='me'|'chat') — keep a fact a member asked you to keep",
    stored_call=stored_call,
)

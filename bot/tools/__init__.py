"""Tools the model can call, one module each; `default_tools()` is the set the bot offers."""

from __future__ import annotations

from bot.tools import (
    delete_message,
    expand_tool_result,
    forget,
    inspect_conversation_reference,
    read_document,
    remember,
    search_history,
    send_message,
    set_reaction,
    view_image,
)
from bot.tools.base import Tool


def default_tools() -> tuple[Tool, ...]:
    return (
        send_message.TOOL,
        delete_message.TOOL,
        set_reaction.TOOL,
        inspect_conversation_reference.TOOL,
        expand_tool_result.TOOL,
        search_history.TOOL,
        view_image.TOOL,
        read_document.TOOL,
        remember.TOOL,
        forget.TOOL,
    )

"""The functional core: pure, synchronous functions deciding what history the model is sent."""

from bot.domain.messages import ChatMessage, Role, ToolCall

__all__ = ["ChatMessage", "Role", "ToolCall"]

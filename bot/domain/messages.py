"""The provider-facing message vocabulary: what one model call is made of."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """One tool call of an assistant message; `arguments` is the JSON text the model wrote."""

    id: str
    name: str
    arguments: str = "{}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatMessage:
    """One message as a provider receives it.

    - `images`: attachments really dispatched with this message (URLs or data URIs); each
      costs a fixed token estimate. Older `[IMAGE:...]` markers in `content` are plain text.
    - `tool_call_id` / `name`: set on `tool` messages.
    - `is_breadcrumb`: the trim breadcrumb. Tracked by this flag, never by matching text.
    - `continues_turn`: a user message merged into the previous turn (one reply to a burst).
    - `is_error`: a tool result that reports an error.
    - `tokens`: a cached estimate; `None` means "compute it". Producers that know the
      cost (projection renders each message once) set it so trimming never re-estimates.
    """

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    images: tuple[str, ...] = ()
    is_breadcrumb: bool = False
    continues_turn: bool = False
    is_error: bool = False
    tokens: int | None = None

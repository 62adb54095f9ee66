"""The provider-facing message vocabulary: what one model call is made of."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Role = Literal["system", "user", "assistant", "tool"]

ReasoningFormat = Literal["reasoning_content", "reasoning", "anthropic", "gemini", "openrouter"]
"""The wire form a model's reasoning came in, which decides where it goes back
(docs/architecture.md, Reasoning): an OpenAI-wire message field (`reasoning_content`:
DeepSeek, vLLM, llama.cpp; `reasoning`: Ollama, OpenRouter), Anthropic `thinking` /
`redacted_thinking` blocks, or Gemini thought signatures on tool calls."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Reasoning:
    """A model's reasoning as its provider returned it: opaque, kept byte for byte.

    It belongs to the assistant message it came with and goes back where the provider
    requires it; it is never rendered into text anyone reads (turn context, summaries,
    quotes, search, told-user notes).

    - `format`: see `ReasoningFormat`.
    - `text`: the readable reasoning where there is one (the trace page shows it, folded).
    - `payload`: the provider's own JSON, exactly as received, for forms that must come
      back unchanged (Anthropic blocks with their signatures, Gemini thought signatures by
      tool call id); empty for plain text fields.
    - `model`: the model it came from, as requested. Signed forms go back only to that
      model: after a `/model` switch another model would refuse a signature it did not
      make. Empty (kept before this field): sent as before.
    """

    format: ReasoningFormat
    text: str = ""
    payload: str = ""
    model: str = ""

    def signed_for(self, model: str) -> bool:
        """Whether this reasoning may go back in a request to `model`: text reasoning
        always; a signed form (Anthropic blocks, Gemini signatures) only to its own model."""
        return self.format in ("reasoning_content", "reasoning") or self.model in ("", model)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """One tool call of an assistant message; `arguments` is the JSON text the model wrote."""

    id: str
    name: str
    arguments: str = "{}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ImagePart:
    """An image dispatched with one message, for this call only (never stored).

    - `url`: a `data:<media type>;base64,<data>` URI (what the bot sends: the file it
      downloaded, verified and downscaled) or an https URL (read back from a wire).
    - `width` / `height`: its pixels as sent (0 when unknown).
    - `tokens`: its estimate for the route's provider (`bot.context.images`); `None`: the
      fixed `IMAGE_TOKEN_ESTIMATE`.
    - `label`: what it shows, for people (`m12`, `m12 quoted`); never sent.
    """

    url: str
    width: int = 0
    height: int = 0
    tokens: int | None = None
    label: str = ""

    @property
    def media_type(self) -> str:
        """The data URI's media type (`image/jpeg`); empty for a URL."""
        if not self.url.startswith("data:"):
            return ""
        return self.url[5:].partition(";")[0]

    @property
    def size_bytes(self) -> int:
        """The decoded size of a data URI's payload (0 for a URL)."""
        _, sep, data = self.url.partition(";base64,")
        if not sep:
            return 0
        return len(data) * 3 // 4 - data[-2:].count("=")


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatMessage:
    """One message as a provider receives it.

    - `images`: images really dispatched with this message in this call (the current
      message's, or a tool result's: `view_image`); each costs its `ImagePart.tokens`.
      They are never stored: the next turn shows the message's placeholder only. Older
      `[IMAGE:...]` markers in `content` are plain text.
    - `tool_call_id` / `name`: set on `tool` messages.
    - `is_breadcrumb`: the trim breadcrumb. Tracked by this flag, never by matching text.
    - `continues_turn`: a user message merged into the previous turn (one reply to a burst).
    - `is_error`: a tool result that reports an error.
    - `tokens`: a cached estimate; `None` means "compute it". Producers that know the
      cost (projection renders each message once) set it so trimming never re-estimates.
    - `reasoning`: on assistant messages, the model's reasoning that came with them; the
      provider adapter decides by its rule whether it goes back on the wire.
    """

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    images: tuple[ImagePart, ...] = ()
    is_breadcrumb: bool = False
    continues_turn: bool = False
    is_error: bool = False
    tokens: int | None = None
    reasoning: Reasoning | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CachePlan:
    """Which parts of a request the next request repeats byte for byte.

    See docs/architecture.md, Tokens, caches and usage as billed.

    Each field is an index into `LLMRequest.messages` (the message a breakpoint goes after),
    or `None` when the request has no such point. A provider adapter turns the plan into its
    own dialect (Anthropic `cache_control`, OpenRouter/Qwen content-part `cache_control`,
    OpenAI explicit breakpoints) or ignores it (automatic prefix caches). The current message
    is never a point: its per-turn blocks are dropped next turn, so a write there is never read.
    """

    system_end: int | None = None
    """The last leading system message: the prompt and the tool schemas end here."""
    window_head: int | None = None
    """The breadcrumb or the summary right after the system prompt."""
    previous_read: int | None = None
    """The previous request's last stable message: what this request reads from the cache."""
    last_stable: int | None = None
    """The last message the next request will send unchanged (never the current message)."""
    session_key: str = ""
    """One key per chat session (`prompt_cache_key` routing); empty: none."""

    def points(self) -> tuple[int, ...]:
        """The distinct breakpoint indexes, oldest first."""
        found = {self.system_end, self.window_head, self.previous_read, self.last_stable}
        return tuple(sorted(i for i in found if i is not None))

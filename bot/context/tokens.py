"""The token estimate: CJK-aware characters-per-token heuristic, the same on every path.

`estimate_text_tokens(s) = ceil(cjk + (len(s) - cjk) / 4)`: one token per CJK character,
one per four other characters. A message adds `MESSAGE_OVERHEAD_TOKENS` for its framing,
its tool calls (name + arguments text) and each image it dispatches (`ImagePart.tokens`, the
provider's own rule from `bot.context.images`; `IMAGE_TOKEN_ESTIMATE` when unset).
For ASCII text this is the seed's "about 4 characters per token + 4 per message".

The per-route correction of the estimate from what the provider reported (`TokenCorrection`):
real tokenizers differ by script and by vendor: cl100k packs Chinese at
roughly 0.7–1 token a character, o200k and Qwen's tighter, and emoji, Cyrillic or Thai cost
far more than a quarter. Every ledger line carries both our estimate and the provider's
`input_tokens`, so each route learns one number: `ratio = reported / estimated`.

The update is bounded so one odd reply (a cached-token quirk, a provider that counts images
differently, an estimate over a truncated request) cannot swing it:

- each observation's ratio is clamped to [`MIN_RATIO`, `MAX_RATIO`];
- the state moves towards it in log space by a running mean while there are few samples
  (the first calls count fully, so a cold route converges fast) and by `FLOOR_WEIGHT` later;
- every step is clamped to `MAX_STEP` in log space (±6 % a call): one odd reply moves a
  settled route by at most that, and a cold route still reaches 0.55 or 2.0 within about
  twelve calls and settles inside twenty.

Calls whose estimate is tiny (under `MIN_ESTIMATE` tokens) teach nothing: the per-message
framing dominates them. `TokenCorrection` is frozen and serialises to a small dict, so the
shell can persist one per route and the correction survives a restart.

See docs/architecture.md, Tokens, caches and usage as billed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.domain.messages import ChatMessage, ImagePart

MESSAGE_OVERHEAD_TOKENS = 4
IMAGE_TOKEN_ESTIMATE = 765
"""One dispatched image. 765 is what a 1024x1024 image costs at OpenAI's high detail
(4 tiles x 170 + 85); smaller or low-detail images cost less, so this errs high."""

_CJK = re.compile(
    "[\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]"
)


def image_part_tokens(image: ImagePart) -> int:
    """One dispatched image's estimate: its own, or the fixed constant."""
    return IMAGE_TOKEN_ESTIMATE if image.tokens is None else image.tokens


def count_cjk(text: str) -> int:
    """Characters in the CJK ranges of the estimate."""
    if text.isascii():
        return 0
    return len(_CJK.findall(text))


def estimate_text_tokens(text: str) -> int:
    """`ceil(cjk + (len - cjk) / 4)`; 0 for the empty string."""
    if not text:
        return 0
    cjk = count_cjk(text)
    # ceil(cjk + rest/4) == cjk + ceil(rest/4) since cjk is an integer
    return cjk + -(-(len(text) - cjk) // 4)


def estimate_message_tokens(message: ChatMessage) -> int:
    """The cached estimate when the producer set one, else content + framing + calls + images."""
    if message.tokens is not None:
        return message.tokens
    return compute_message_tokens(message)


def compute_message_tokens(message: ChatMessage) -> int:
    """The estimate from scratch, ignoring any cached value."""
    total = estimate_text_tokens(message.content) + MESSAGE_OVERHEAD_TOKENS
    for call in message.tool_calls:
        total += estimate_text_tokens(call.name) + estimate_text_tokens(call.arguments)
    if message.tool_calls and message.reasoning is not None:
        # a tool turn's reasoning goes back on the wire (adapters/llm/dialects.py)
        total += estimate_text_tokens(message.reasoning.text)
    return total + sum(image_part_tokens(image) for image in message.images)


def estimate_history_tokens(messages: Iterable[ChatMessage]) -> int:
    """The sum of the message estimates."""
    return sum(estimate_message_tokens(m) for m in messages)


def with_token_estimate(message: ChatMessage) -> ChatMessage:
    """The same message with its estimate cached in `tokens`: `dataclasses.replace` spelled
    out, as projection does it for every message of every turn (about twice as fast)."""
    return ChatMessage(
        role=message.role,
        content=message.content,
        tool_calls=message.tool_calls,
        tool_call_id=message.tool_call_id,
        name=message.name,
        images=message.images,
        is_breadcrumb=message.is_breadcrumb,
        continues_turn=message.continues_turn,
        is_error=message.is_error,
        tokens=compute_message_tokens(message),
        reasoning=message.reasoning,
    )


def estimate_span_tokens(messages: Sequence[ChatMessage], begin: int, end: int) -> int:
    """The estimate of `messages[begin:end]`, reading cached costs where they are set."""
    total = 0
    for i in range(begin, end):
        cached = messages[i].tokens
        total += compute_message_tokens(messages[i]) if cached is None else cached
    return total


def ensure_token_estimate(message: ChatMessage) -> ChatMessage:
    """The message with its estimate cached; unchanged when it already carries one."""
    if message.tokens is not None:
        return message
    return with_token_estimate(message)


def system_tokens(messages: Iterable[ChatMessage]) -> int:
    """The estimate of the system messages among `messages`."""
    return sum(estimate_message_tokens(m) for m in messages if m.role == "system")


def image_tokens(messages: Iterable[ChatMessage]) -> int:
    """What the images the messages dispatch add to their estimate."""
    return sum(image_part_tokens(image) for m in messages for image in m.images)


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestTokens:
    """Our estimate of a request's messages, split at the current message.

    `history` is the messages before `current_index` (system messages left out), `current`
    the current message and everything after it (tool steps of this turn); both without
    their images, which `images` counts for the whole request. `messages` is the plain sum
    of the non-system estimates, images included.
    """

    history: int
    current: int
    images: int
    messages: int
    image_count: int = 0
    """How many images the request sends (`images` is their tokens)."""


def split_request_tokens(messages: Sequence[ChatMessage], current_index: int) -> RequestTokens:
    """The history / current / images split of `messages` (the ledger's `est_*`)."""
    before = messages[:current_index]
    after = messages[current_index:]
    history = sum(estimate_message_tokens(m) for m in before if m.role != "system")
    current = estimate_history_tokens(after)
    return RequestTokens(
        history=max(0, history - image_tokens(before)),
        current=max(0, current - image_tokens(after)),
        images=image_tokens(messages),
        messages=history + current,
        image_count=sum(len(m.images) for m in messages),
    )


# ---------------------------------------------------------------- per-route correction

MIN_RATIO = 0.25
MAX_RATIO = 4.0
MAX_STEP = math.log(1.06)
FLOOR_WEIGHT = 0.25
MIN_ESTIMATE = 32


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenCorrection:
    """What one route has learned: reported ≈ `ratio` × our estimate, from `samples` calls."""

    ratio: float = 1.0
    samples: int = 0

    def apply(self, estimate: int) -> int:
        """The corrected estimate (rounded up, so a budget errs on the safe side)."""
        if estimate <= 0:
            return 0
        return math.ceil(estimate * self.ratio - 1e-9)

    def to_estimate(self, tokens: int) -> int:
        """How much of our estimate fits in `tokens` real tokens (a budget or a window):
        the inverse of `apply`, rounded down so what fits really fits. 0 stays 0."""
        if tokens <= 0:
            return tokens
        return max(1, math.floor(tokens / self.ratio + 1e-9))

    def to_dict(self) -> dict[str, float | int]:
        return {"ratio": round(self.ratio, 6), "samples": self.samples}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TokenCorrection:
        """Read a persisted state; anything malformed or out of range starts fresh."""
        ratio = data.get("ratio")
        samples = data.get("samples")
        if (
            isinstance(ratio, int | float)
            and not isinstance(ratio, bool)
            and math.isfinite(ratio)
            and MIN_RATIO <= ratio <= MAX_RATIO
            and isinstance(samples, int)
            and not isinstance(samples, bool)
            and samples >= 0
        ):
            return cls(ratio=float(ratio), samples=samples)
        return cls()


NO_CORRECTION = TokenCorrection()


def observe(state: TokenCorrection, *, estimated: int, reported: int | None) -> TokenCorrection:
    """The state after one call whose input we estimated and the provider counted.

    Unchanged when the provider reported nothing (or zero) or the estimate is too small to
    say anything.
    """
    if reported is None or reported <= 0 or estimated < MIN_ESTIMATE:
        return state
    seen = min(max(reported / estimated, MIN_RATIO), MAX_RATIO)
    weight = max(1.0 / (state.samples + 1), FLOOR_WEIGHT)
    current = math.log(state.ratio)
    step = weight * (math.log(seen) - current)
    step = min(max(step, -MAX_STEP), MAX_STEP)
    ratio = min(max(math.exp(current + step), MIN_RATIO), MAX_RATIO)
    return TokenCorrection(ratio=ratio, samples=state.samples + 1)


def corrections_to_dict(book: Mapping[str, TokenCorrection]) -> dict[str, dict[str, float | int]]:
    """Several routes' states, keyed by route name, as one JSON-ready dict."""
    return {route: state.to_dict() for route, state in sorted(book.items())}


def corrections_from_dict(data: Mapping[str, Any]) -> dict[str, TokenCorrection]:
    """The inverse of `corrections_to_dict`; entries that are not objects are skipped."""
    return {
        str(route): TokenCorrection.from_dict(value)
        for route, value in data.items()
        if isinstance(value, Mapping)
    }


def exact_message_tokens(messages: Iterable[ChatMessage], count: Callable[[str], int]) -> int:
    """The messages as an exact tokenizer (`count`) sees them, framed and charged like the
    estimate: text, tool call names and arguments, 4 per message, each image's estimate."""
    total = 0
    for message in messages:
        total += count(message.content) + MESSAGE_OVERHEAD_TOKENS
        for call in message.tool_calls:
            total += count(call.name) + count(call.arguments)
        total += image_tokens((message,))
    return total

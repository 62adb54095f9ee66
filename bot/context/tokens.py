"""The token estimate: CJK-aware characters-per-token heuristic, the same on every path.

`estimate_text_tokens(s) = ceil(cjk + (len(s) - cjk) / 4)`: one token per CJK character,
one per four other characters. A message adds `MESSAGE_OVERHEAD_TOKENS` for its framing,
its tool calls (name + arguments text) and each image it dispatches (`ImagePart.tokens`, the
provider's own rule from `bot.context.images`; `IMAGE_TOKEN_ESTIMATE` when unset).
For ASCII text this is the seed's "about 4 characters per token + 4 per message".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

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
    """The same message with its estimate cached in `tokens`."""
    return replace(message, tokens=compute_message_tokens(message))


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

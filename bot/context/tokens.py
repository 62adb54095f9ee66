"""The token estimate: CJK-aware characters-per-token heuristic, the same on every path.

`estimate_text_tokens(s) = ceil(cjk + (len(s) - cjk) / 4)`: one token per CJK character,
one per four other characters. A message adds `MESSAGE_OVERHEAD_TOKENS` for its framing,
its tool calls (name + arguments text) and `IMAGE_TOKEN_ESTIMATE` per image it dispatches.
For ASCII text this is the seed's "about 4 characters per token + 4 per message".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace

from bot.domain.messages import ChatMessage

MESSAGE_OVERHEAD_TOKENS = 4
IMAGE_TOKEN_ESTIMATE = 765
"""One dispatched image. 765 is what a 1024x1024 image costs at OpenAI's high detail
(4 tiles x 170 + 85); smaller or low-detail images cost less, so this errs high."""

_CJK = re.compile(
    "[\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]"
)


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
    return total + IMAGE_TOKEN_ESTIMATE * len(message.images)


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

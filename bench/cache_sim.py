"""A provider-style prefix cache simulator: hits on whole 64-token blocks of shared prefix.

A request is serialized as the concatenation of its messages (role, content, tool calls,
tool call id), each message's text memoised. The text is cut into blocks of 64 estimated
tokens (the `bot.context.tokens` estimate per character: 1 for CJK, 1/4 otherwise), and each
block is named by a hash chained over every block before it, so a block can only hit when
the whole prefix up to it was sent before. A request hits on the longest run of leading
blocks that ANY earlier request also had (DeepSeek's disk cache and OpenAI's prompt cache
both work this way); the trailing partial block never hits.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from bot.domain.messages import ChatMessage

BLOCK_TOKENS = 64
_QUARTERS = BLOCK_TOKENS * 4  # weights in quarter tokens keep the arithmetic integral
_CJK = (
    (0x3000, 0x303F),
    (0x3040, 0x30FF),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xAC00, 0xD7AF),
    (0xF900, 0xFAFF),
    (0xFF00, 0xFFEF),
)


def _weight(char: str) -> int:
    code = ord(char)
    if code < 0x3000:
        return 1
    return 4 if any(lo <= code <= hi for lo, hi in _CJK) else 1


def serialize(message: ChatMessage) -> str:
    """What a provider would see of one message, as one string."""
    calls = "".join(f"<call {c.id} {c.name} {c.arguments}>" for c in message.tool_calls)
    tool_id = f"<id {message.tool_call_id}>" if message.tool_call_id else ""
    return f"<|{message.role}|>{tool_id}{message.content}{calls}<|end|>"


@dataclass(frozen=True, slots=True)
class CacheResult:
    input_quarters: int
    cached_quarters: int

    @property
    def input_tokens(self) -> float:
        return self.input_quarters / 4

    @property
    def cached_tokens(self) -> float:
        return self.cached_quarters / 4


class PrefixCache:
    """Feed requests in order with `send`; each returns what it would have had cached."""

    def __init__(self) -> None:
        self._seen: set[bytes] = set()
        self._cumulative: dict[str, list[int]] = {}

    def _weights(self, text: str) -> list[int]:
        found = self._cumulative.get(text)
        if found is None:
            found = list(itertools.accumulate(map(_weight, text), initial=0))
            self._cumulative[text] = found
        return found

    def send(self, prefix: str, messages: Sequence[ChatMessage]) -> CacheResult:
        """`prefix` stands for what precedes the messages on the wire (the tool schemas)."""
        texts = [prefix, *(serialize(m) for m in messages)]
        whole = "".join(texts)
        # block ends as offsets into `whole`, found per text with its memoised weights
        ends: list[tuple[int, int]] = []  # (char offset, quarter offset)
        base_chars = 0
        base_quarters = 0
        target = _QUARTERS
        for text in texts:
            weights = self._weights(text)
            total = weights[-1]
            while base_quarters + total >= target:
                cut = bisect.bisect_left(weights, target - base_quarters)
                ends.append((base_chars + cut, base_quarters + weights[cut]))
                target = base_quarters + weights[cut] + _QUARTERS
            base_chars += len(text)
            base_quarters += total
        chain = b""
        start = 0
        cached = 0
        hitting = True
        for end, quarters in ends:
            chain = hashlib.blake2b(
                chain + whole[start:end].encode("utf-8"), digest_size=16
            ).digest()
            start = end
            if hitting and chain in self._seen:
                cached = quarters
            else:
                hitting = False
                self._seen.add(chain)
        return CacheResult(input_quarters=base_quarters, cached_quarters=cached)


def hit_rate(results: Sequence[CacheResult]) -> float:
    """Cached tokens over input tokens, summed over the requests."""
    total = sum(r.input_quarters for r in results)
    return sum(r.cached_quarters for r in results) / total if total else 0.0

"""The prompt cache of the fake servers: reads and writes consistent with what was sent.

A request is a list of blocks in prefix order (tools, system, messages' content parts), each
with its token count and whether it carries a breakpoint. Two models:

- `breakpoints` (Anthropic, OpenRouter/Qwen `cache_control`): each breakpoint writes the
  prefix ending there; a request reads the longest written prefix that ends at one of its
  breakpoints or up to 20 blocks before one (Anthropic's lookback); what lies between the
  read and the last breakpoint is written.
- `auto` (OpenAI, DeepSeek…): every request's whole prefix is remembered; the longest
  remembered prefix is read, nothing is billed as a write.

Tokens are estimated (4 characters a token): the fakes only need to be self-consistent.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

LOOKBACK_BLOCKS = 20


@dataclass(frozen=True, slots=True)
class Block:
    content: Any
    marked: bool = False
    keyed: str = ""
    """What else keys the prefix from this block on, uncounted (Anthropic's message blocks:
    the request's `tool_choice`, whose changes "only affect message blocks")."""


@dataclass(frozen=True, slots=True)
class Accounting:
    total: int
    read: int
    written: int


def block_tokens(content: Any) -> int:
    return len(json.dumps(content, ensure_ascii=False, sort_keys=True)) // 4 + 1


@dataclass(slots=True)
class PrefixCache:
    mode: Literal["breakpoints", "auto"] = "breakpoints"
    _written: set[str] = field(default_factory=set)

    def account(self, blocks: list[Block]) -> Accounting:
        keys: list[str] = []
        ends: list[int] = []
        digest = hashlib.sha256()
        total = 0
        for block in blocks:
            digest.update(json.dumps(block.content, sort_keys=True).encode())
            digest.update(block.keyed.encode())
            keys.append(digest.copy().hexdigest())
            total += block_tokens(block.content)
            ends.append(total)
        if self.mode == "auto":
            read = 0
            for position in range(len(keys) - 1, -1, -1):
                if keys[position] in self._written:
                    read = ends[position]
                    break
            self._written.update(keys)
            return Accounting(total=total, read=read, written=0)
        marks = [i for i, block in enumerate(blocks) if block.marked]
        read_at = -1
        for mark in reversed(marks):
            for position in range(mark, max(-1, mark - LOOKBACK_BLOCKS), -1):
                if keys[position] in self._written:
                    read_at = max(read_at, position)
                    break
        read = ends[read_at] if read_at >= 0 else 0
        written = 0
        if marks and marks[-1] > read_at:
            written = ends[marks[-1]] - read
        self._written.update(keys[mark] for mark in marks)
        return Accounting(total=total, read=read, written=written)


__all__ = ["LOOKBACK_BLOCKS", "Accounting", "Block", "PrefixCache", "block_tokens"]

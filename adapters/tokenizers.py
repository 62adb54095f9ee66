"""Exact offline token counting from a tokenizer file the operator configured for a route.

Two file shapes are read, and nothing is ever downloaded:

- a tiktoken BPE file (`*.tiktoken`, optionally gzip-compressed): one `<base64 token> <rank>`
  line per token, the format OpenAI publishes for cl100k/o200k and Qwen ships for its models.
  The file holds the ranks only; the pre-tokenizer split pattern is named (`cl100k`,
  `o200k`, `qwen`) or given as a regex. Counted with `tiktoken` (the `tokenizers` extra).
- a Hugging Face `tokenizer.json` (DeepSeek, Qwen, Llama…), counted with `tokenizers`.

Both libraries are optional extras: the default install counts with the heuristic of
`bot.context.tokens`, and `load_token_counter` raises `TokenizerUnavailable` with the
package to install when a configured file needs one that is missing. Special-token text
inside a message is counted as ordinary text (a member typing `<|endoftext|>` is just text).
"""

from __future__ import annotations

import base64
import functools
import gzip
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

# Split patterns of the published encodings (format facts needed to reproduce their counts).
_CL100K = (
    r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"
    r"|\s++$|\s*[\r\n]|\s+(?!\S)|\s"
)
_O200K = "|".join(
    [
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"\p{N}{1,3}",
        r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
        r"\s*[\r\n]+",
        r"\s+(?!\S)",
        r"\s+",
    ]
)
_QWEN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
PATTERNS: dict[str, str] = {"cl100k": _CL100K, "o200k": _O200K, "qwen": _QWEN}

TokenizerKind = Literal["tiktoken", "tokenizer.json"]


class TokenizerUnavailable(RuntimeError):
    """The configured tokenizer file cannot be used (missing package, unreadable file)."""


@dataclass(frozen=True, slots=True)
class TokenCounter:
    """Counts the tokens of a text exactly as the configured tokenizer does."""

    name: str
    kind: TokenizerKind
    vocabulary: int
    _count: Callable[[str], int]

    def count(self, text: str) -> int:
        return self._count(text) if text else 0


def read_tiktoken_ranks(path: Path) -> dict[bytes, int]:
    """The `token → rank` table of a tiktoken BPE file (plain or `.gz`)."""
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    ranks: dict[bytes, int] = {}
    for number, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token, validate=True)] = int(rank)
        except ValueError as exc:
            raise TokenizerUnavailable(f"{path}: line {number} is not '<base64> <rank>'") from exc
    if not ranks:
        raise TokenizerUnavailable(f"{path}: no tokens")
    return ranks


def _default_pattern(vocabulary: int) -> str:
    return "o200k" if vocabulary >= 190_000 else "cl100k"


def load_token_counter(path: Path | str, *, pattern: str | None = None) -> TokenCounter:
    """A counter for the file at `path`: `tokenizer.json` by its JSON shape, else tiktoken.

    `pattern` (tiktoken files only): `cl100k`, `o200k`, `qwen` or a regex; by default
    `o200k` for vocabularies of 190k tokens or more, else `cl100k`.
    """
    path = Path(path)
    if not path.is_file():
        raise TokenizerUnavailable(f"{path}: no such file")
    stat = path.stat()
    return _load_unchanged(path, stat.st_mtime_ns, stat.st_size, pattern)


@functools.lru_cache(maxsize=8)
def _load_unchanged(path: Path, mtime_ns: int, size: int, pattern: str | None) -> TokenCounter:
    """A file is read once per process while it is unchanged (reading cl100k takes ~0.2 s
    of CPU; routes may share a file); a failed read is not kept."""
    del mtime_ns, size  # the cache key: a file changed on disk is read again
    with path.open("rb") as handle:
        head = handle.read(64).lstrip()
    if head.startswith(b"{"):
        return _load_tokenizer_json(path)
    return _load_tiktoken(path, pattern)


def _load_tiktoken(path: Path, pattern: str | None) -> TokenCounter:
    try:
        import tiktoken
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise TokenizerUnavailable(
            f"{path}: a tiktoken BPE file needs the 'tiktoken' package"
        ) from exc
    ranks = read_tiktoken_ranks(path)
    name = pattern or _default_pattern(len(ranks))
    regex = PATTERNS.get(name, name)
    try:
        encoding = tiktoken.Encoding(
            name=f"file:{path.name}", pat_str=regex, mergeable_ranks=ranks, special_tokens={}
        )
    except ValueError as exc:
        raise TokenizerUnavailable(f"{path}: {exc}") from exc

    def count(text: str) -> int:
        return len(encoding.encode_ordinary(text))

    return TokenCounter(path.name, "tiktoken", len(ranks), count)


def _load_tokenizer_json(path: Path) -> TokenCounter:
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise TokenizerUnavailable(
            f"{path}: a tokenizer.json file needs the 'tokenizers' package"
        ) from exc
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # the Rust side raises a plain Exception on a bad file
        raise TokenizerUnavailable(f"{path}: {exc}") from exc

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False).ids)

    return TokenCounter(path.name, "tokenizer.json", tokenizer.get_vocab_size(), count)

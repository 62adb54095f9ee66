"""The benchmark's workload generator and cache simulator: structural facts on tiny sizes."""

from __future__ import annotations

from bench.cache_sim import PrefixCache, hit_rate
from bench.workload import PER_TURN_CHARS, generate
from bot.domain.messages import ChatMessage


def _request(text: str) -> list[ChatMessage]:
    return [ChatMessage(role="system", content=text), ChatMessage(role="user", content="hi")]


def test_the_workload_is_reproducible_from_its_seed() -> None:
    first, again, other = generate(60, seed=5), generate(60, seed=5), generate(60, seed=6)
    assert first == again
    assert first.events != other.events
    assert first.turns > 0
    assert all(e.index > e.quote.target for e in first.events if e.quote is not None)


def test_the_legacy_per_turn_blocks_have_the_adr_sizes() -> None:
    workload = generate(20, seed=5)
    event = workload.events[3]
    sizes = [
        len(workload.turn_context(event, 0)),
        len(workload.told_user(event)),
        len(workload.per_turn.skill_notes),
        len(workload.per_turn.workspace_rules),
        len(workload.tool_index(0)),
    ]
    assert sum(sizes) == PER_TURN_CHARS == 7_658


def test_an_identical_request_hits_almost_entirely() -> None:
    cache = PrefixCache()
    request = _request("stable system prompt, 系统提示词 " * 300)
    assert cache.send("tools", request).cached_quarters == 0
    again = cache.send("tools", request)
    assert again.cached_quarters / again.input_quarters > 0.97


def test_disjoint_requests_never_hit() -> None:
    cache = PrefixCache()
    results = [cache.send("", _request(f"{n} " + "x" * 2_000)) for n in range(5)]
    assert hit_rate(results) == 0


def test_a_request_that_appends_hits_on_the_shared_prefix_only() -> None:
    cache = PrefixCache()
    base = _request("a" * 4_000)  # 1,000 tokens: 15 whole blocks
    cache.send("", base)
    longer = cache.send("", [*base, ChatMessage(role="user", content="b" * 4_000)])
    assert 15 * 64 <= longer.cached_tokens <= 1_010
    assert longer.input_tokens > 2_000


def test_the_runtime_keeps_its_history_prefix_between_window_moves() -> None:
    from bench.economy import run

    # 80 events of seed 3 are the smallest workload here that moves the window (and quotes,
    # and makes the legacy bot summarise): the breaks are judged against a real move
    found = run(size=80, seed=3)
    ours = found.ours
    assert ours.calls >= found.workload.turns
    assert ours.window_moves >= 1
    assert ours.prefix_breaks <= ours.window_moves
    assert ours.history_max <= 8_000
    assert ours.quote_calls == 0
    assert found.workload.quoted_turns > 0
    assert found.legacy.quote_calls == found.workload.quoted_turns
    rows = found.rows
    # holding the legacy window for the turn is what makes its cache work at all
    assert rows["legacy_held"].hit_rate > rows["legacy_resliced"].hit_rate
    assert rows["legacy_held"].prefix_breaks < rows["legacy_resliced"].prefix_breaks
    assert rows["legacy_summary"].summary_calls >= 1
    assert rows["legacy_held"].summary_calls == 0
    # LangChain on conversation-only storage needs no quote call and sees more conversation
    fair_lc = rows["langchain_conv"]
    assert fair_lc.quote_calls == 0
    assert fair_lc.calls == ours.calls
    assert fair_lc.visible_p50 > rows["langchain_legacy"].visible_p50
    assert fair_lc.history_max <= 8_000
    # billable-equivalent input lies between a quarter of the input and all of it
    for row in rows.values():
        assert row.billable_per_call > 0
        assert row.input_cost > 0
    # the stable rules and tool index live in the system prompt, not on every current message
    assert int(found.notes["per_turn_chars"]) < 500


def test_the_postgres_rows_say_which_database_ran_them_and_how_to_run_them() -> None:
    from bench.__main__ import RUN_WITH_POSTGRES, backend_lines, postgres_figure, postgres_url
    from bench.bench_ingest import INGEST_HEADER, IngestResult

    flag, env = "postgresql+asyncpg://flag/db", {"TEST_POSTGRES_URL": "postgresql+asyncpg://env/db"}
    assert postgres_url(flag, env) == flag  # the flag wins
    assert postgres_url(None, env) == env["TEST_POSTGRES_URL"]
    assert postgres_url(None, {}) is None

    sqlite = IngestResult(2_000, 20, 1.0, 2.0, 200.0, 210.0, stored_in_order=True)
    alone = backend_lines(INGEST_HEADER, [("SQLite", sqlite)])
    assert alone[-1] == f"| PostgreSQL | not run: `{RUN_WITH_POSTGRES}` |"
    assert postgres_figure("ingest", None) == (
        "ingest (PostgreSQL, no target)",
        f"not run (`{RUN_WITH_POSTGRES}`)",
        None,
    )

    postgres = IngestResult(2_000, 20, 1.5, 4.0, 200.0, 210.0, stored_in_order=False)
    both = backend_lines(INGEST_HEADER, [("SQLite", sqlite), ("PostgreSQL", postgres)])
    assert [line.split(" | ")[0] for line in both[1:]] == ["| SQLite", "| PostgreSQL"]
    assert "| 500 |" in both[-1]  # 2,000 messages in 4 s
    assert postgres_figure("ingest", postgres)[1] == "500 (NOT stored once, in order)"

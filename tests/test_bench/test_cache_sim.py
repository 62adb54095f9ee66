"""The provider cache models of `bench/cache_sim.py` on tiny hand-checked requests: a wrong
model makes every row of the REPORT.md cache tables wrong."""

from __future__ import annotations

from bench.cache_sim import (
    ADR_MESSAGES,
    WRITE_SHARE,
    Billed,
    BreakpointCache,
    CacheBench,
    PrefixCache,
    Prefixes,
    ProviderRow,
    UnitCache,
    anthropic_points,
    request_prefixes,
)
from bot.domain.messages import CachePlan, ChatMessage
from bot.ports import LLMRequest, ToolSpec

TTLS = ("5m", "1h")


def chain(names: str, tokens: list[int]) -> Prefixes:
    """A request of one-block messages named by letters: digests are the prefixes."""
    return Prefixes(
        tokens=tuple(tokens),
        digests=tuple(names[: i + 1].encode() for i in range(len(names))),
        blocks=tuple(range(1, len(names) + 1)),
        roles=tuple("user" for _ in names),
    )


def grow(n: int, per: int = 100) -> list[int]:
    return [per * (i + 1) for i in range(n)]


def test_a_breakpoint_reads_an_entry_at_most_20_blocks_back() -> None:
    names = "abcdefghijklmnopqrstuvwxyz"
    cache = BreakpointCache(min_tokens=0)
    first = cache.send(chain(names, grow(26)), [(2, "5m")], at=0)
    assert (first.read, first.write_5m) == (0, 300)
    # 20 blocks after the entry: found by the lookback, 200 more tokens written
    near = cache.send(chain(names, grow(26)), [(22, "5m")], at=1)
    assert (near.read, near.write_5m) == (300, 2300 - 300)
    # 21 blocks after it (and nothing written at 23 before): not found, all written
    far = BreakpointCache(min_tokens=0)
    far.send(chain(names, grow(26)), [(2, "5m")], at=0)
    missed = far.send(chain(names, grow(26)), [(23, "5m")], at=1)
    assert (missed.read, missed.write_5m) == (0, 2400)


def test_an_entry_expires_after_its_ttl_and_a_read_refreshes_it() -> None:
    request = chain("abc", [1500, 1600, 1700])
    cache = BreakpointCache(min_tokens=1024)
    cache.send(request, [(1, "5m")], at=0)
    assert cache.send(request, [(1, "5m")], at=299).read == 1600  # refreshed at 299
    assert cache.send(request, [(1, "5m")], at=598).read == 1600  # 299 s after the refresh
    late = cache.send(request, [(1, "5m")], at=598 + 301)
    assert (late.read, late.write_5m) == (0, 1600)
    hour = BreakpointCache(min_tokens=1024)
    hour.send(request, [(1, "1h")], at=0)
    assert hour.send(request, [(1, "1h")], at=3000).read == 1600
    assert hour.send(request, [(1, "1h")], at=3000 + 3601).read == 0


def test_a_prefix_under_the_minimum_is_never_written() -> None:
    request = chain("abc", [500, 1000, 1200])
    cache = BreakpointCache(min_tokens=1024)
    first = cache.send(request, [(1, "5m"), (2, "5m")], at=0)
    assert (first.read, first.write_5m, first.uncached) == (0, 1200, 0)
    again = cache.send(request, [(1, "5m")], at=1)
    assert (again.read, again.write_5m, again.uncached) == (0, 0, 1200)


def test_writes_are_billed_per_ttl_from_the_read_point_to_the_last_breakpoint() -> None:
    cache = BreakpointCache(min_tokens=0)
    cache.send(chain("ab", [1000, 2000]), [(0, "1h")], at=0)
    billed = cache.send(chain("abcd", [1000, 2000, 3000, 4000]), [(1, "1h"), (2, "5m")], at=1)
    assert (billed.read, billed.write_1h, billed.write_5m, billed.uncached) == (
        1000,
        1000,
        1000,
        1000,
    )


def test_gpt56_matches_any_earlier_breakpoint_exactly_without_a_lookback() -> None:
    names = "abcdefghijklmnopqrstuvwxyz"
    cache = BreakpointCache(min_tokens=0, lookback=None)
    cache.send(chain(names, grow(26)), [(1, "5m")], at=0)
    assert cache.send(chain(names, grow(26)), [(25, "5m")], at=1).read == 200


def text_tokens(n: int) -> ChatMessage:
    return ChatMessage(role="user", content="x" * (4 * n))


def test_automatic_prefix_hits_round_down_to_blocks_and_respect_the_minimum() -> None:
    """The serialised message adds a few tokens of tags: shared prefixes are chosen well
    inside a block so the rounding is unambiguous."""
    for block, minimum, shared, expected in (
        (128, 1024, 1100, 1024),  # 8 blocks of 128
        (128, 1024, 1000, 0),  # 896 rounded is under OpenAI's 1,024 minimum
        (64, 0, 1000, 960),  # 15 blocks of 64
    ):
        cache = PrefixCache(block_tokens=block, min_tokens=minimum)
        cache.send("", [text_tokens(shared), ChatMessage(role="user", content="a" * 4000)])
        hit = cache.send("", [text_tokens(shared), ChatMessage(role="user", content="b" * 4000)])
        assert hit.cached_tokens == expected, (block, minimum, shared)


def test_deepseek_units_follow_the_documented_examples() -> None:
    """A+B then A+C: no hit (A+B is not fully matched), A becomes a unit; A+D hits A;
    A+B+C hits the unit A+B (the end of the first request's input)."""
    cache = UnitCache()
    ab = Prefixes((1000, 1500), (b"A", b"AB"), (1, 2), ("system", "user"))
    ac = Prefixes((1000, 1400), (b"A", b"AC"), (1, 2), ("system", "user"))
    ad = Prefixes((1000, 1300), (b"A", b"AD"), (1, 2), ("system", "user"))
    abc = Prefixes((1000, 1500, 1900), (b"A", b"AB", b"ABC"), (1, 2, 3), ("system", "user", "user"))
    assert cache.send(ab).read == 0
    assert cache.send(ac).read == 0
    assert cache.send(ad).read == 1000
    assert cache.send(abc).read == 1500


def test_deepseek_finds_a_common_prefix_inside_a_message() -> None:
    """The guide's long-text example: the report inside the user message is the common
    prefix A of two requests; the second hits nothing, the third hits A (to the character,
    not rounded to the message before it)."""
    system = ChatMessage(role="system", content="You analyse reports. " * 20)
    report = "R" * 4000  # 1,000 tokens of report

    def asking(question: str) -> Prefixes:
        return request_prefixes([system, ChatMessage(role="user", content=report + question)])

    cache = UnitCache()
    first = asking("\n\nSummarise it.")
    assert cache.send(first).read == 0
    assert cache.send(asking("\n\nIs it profitable?")).read == 0
    third = cache.send(asking("\n\nWho audited it?"))
    assert first.tokens[0] + 1000 <= third.read < first.tokens[1]


def test_the_bench_marks_the_plan_as_the_adapter_does() -> None:
    messages = tuple(ChatMessage(role=r, content=r) for r in ("system", "user", "user", "user"))
    plan = CachePlan(system_end=0, window_head=1, previous_read=2, last_stable=3)
    request = LLMRequest(model="m", messages=messages, cache_plan=plan)
    # 3 is the current (last user) message: never marked, whatever the plan says
    assert anthropic_points(request, "1h") == [(0, "1h"), (1, "1h"), (2, "1h")]
    # at 5m the system prompt is still written for an hour (1h entries first)
    assert anthropic_points(request, "5m") == [(0, "1h"), (1, "5m"), (2, "5m")]


def test_anthropic_keys_the_conversation_by_tool_choice_not_the_system_prompt() -> None:
    messages = [ChatMessage(role="system", content="rules"), ChatMessage(role="user", content="q")]
    plain = request_prefixes(messages, tools_text="[tools]")
    none = request_prefixes(messages, tools_text="[tools]", messages_key="tool_choice=none")
    assert plain.digests[0] == none.digests[0]
    assert plain.digests[1] != none.digests[1]
    summary = LLMRequest(
        model="m",
        messages=(*messages, ChatMessage(role="user", content="fold")),
        tools=(ToolSpec(name="t", description="T", parameters={"type": "object"}),),
        tool_choice="none",
        cache_plan=CachePlan(system_end=0, last_stable=1),
    )
    # the conversation's entries would never be read by a turn: only the prompt is marked
    assert anthropic_points(summary, "5m") == [(0, "1h")]


def test_a_workload_shorter_than_the_adrs_gets_figures_not_verdicts() -> None:
    def row(provider: str, mode: str, read: int) -> ProviderRow:
        billed = (Billed(input=100, read=read),)
        return ProviderRow(provider=provider, mode=mode, billed=billed, write_share=WRITE_SHARE)

    rows = {
        "every provider": [
            *(row("anthropic", f"{m}, {ttl}", 90) for m in ("ours", "automatic") for ttl in TTLS),
            *(row(p, "automatic", 90) for p in ("openai", "auto64", "deepseek")),
        ]
    }
    short = CacheBench(requests=1, rows=rows, markdown="", messages=ADR_MESSAGES - 1)
    full = CacheBench(requests=1, rows=rows, markdown="", messages=ADR_MESSAGES)
    assert {ok for _, _, ok in short.targets()} == {None}
    assert all("judged on the 400-message ADR workload" in v for _, v, _ in short.targets())
    assert len(full.targets()) == len(short.targets())
    assert None not in {ok for _, _, ok in full.targets()}


def test_the_replay_of_a_small_workload_reports_every_provider() -> None:
    from bench import cache_replay

    result = cache_replay.run(80, seed=5)
    assert result.requests > 0
    assert len(result.rows) == 5
    auto = result.find("anthropic", "automatic (newest message), 5m")
    ours = result.find("anthropic", "ours (cache plan, ≤ 4 markers), 5m")
    uncached = result.find("anthropic", "uncached")
    assert uncached.cost_share == 1.0
    assert ours.hit_rate > auto.hit_rate
    assert ours.cost_share < auto.cost_share
    assert {label for label, _, _ in result.targets()} >= {
        "Anthropic, our breakpoints (5m) ≤ 35 % of uncached input cost"
    }


def test_with_reasoning_a_tool_turns_thinking_is_in_the_bytes_the_caches_see() -> None:
    """The reasoning rows replay what the wire sends: the thinking of tool turns only."""
    from bench.cache_sim import with_wire_reasoning
    from bot.domain.messages import Reasoning, ToolCall

    thought = Reasoning(format="anthropic", text="t", payload='[{"type": "thinking"}]')
    call = ToolCall(id="c1", name="f")
    messages = (
        ChatMessage(role="system", content="s"),
        ChatMessage(role="user", content="q1"),
        ChatMessage(role="assistant", content="", tool_calls=(call,), reasoning=thought),
        ChatMessage(role="tool", content="ok", tool_call_id="c1"),
        ChatMessage(role="assistant", content="a1", reasoning=thought),
        ChatMessage(role="user", content="q2"),
        ChatMessage(role="assistant", content="a2", reasoning=thought),
        ChatMessage(role="user", content="q3"),
    )
    wired = with_wire_reasoning(LLMRequest(model="m", messages=messages)).messages
    assert [i for i, m in enumerate(wired) if "<thinking" in m.content] == [2, 4]


def test_the_reasoning_rows_compare_the_same_workload_with_and_without() -> None:
    from bench import cache_replay, cache_sim

    plain = cache_replay.run(80, seed=5)
    thinking = cache_replay.run(80, seed=5, thinking=True)
    table = cache_sim.reasoning_markdown(plain, thinking)
    assert table.count("points |") == 6
    label, _, verdict = cache_sim.reasoning_target(plain, thinking)
    assert "within 3 points" in label
    assert verdict is None  # 80 messages: a figure, judged on the ADR workload
    assert thinking.find("anthropic", "uncached").input > plain.find("anthropic", "uncached").input

"""Metering: each model call is one ledger line and the session's `/context` meter, and a
slow ledger disk never holds up the event loop."""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import replace
from datetime import UTC
from pathlib import Path

import pytest

from adapters.llm.scripted import CallTool, Reply, ScriptedModel
from bot.agent.events import EventBus
from bot.agent.ledger import LedgerEntry
from bot.agent.ledger_file import LedgerWriter
from bot.agent.ledger_read import read_entries
from bot.agent.metering import CallMetering
from bot.agent.routes import Prices
from bot.context.tokens import RequestTokens
from bot.domain.ids import SessionKey
from bot.errors import ProviderUnavailable
from bot.ports import LLMRequest, LLMResponse, SessionInfo, TextSink, Usage
from bot.services.usage_report import build_report
from tests.deadlines import EVENT, deadline
from tests.fakes import RecordingMessenger
from tests.test_agent.rig import AT, CHAT, ROUTE, TRIM, make_app, model_call, say


async def test_every_trim_before_a_call_is_on_its_ledger_line(tmp_path: Path) -> None:
    bus = EventBus()
    CallMetering(LedgerWriter(tmp_path, UTC)).attach(bus)
    window_move = replace(TRIM, budget=8000, dropped_turns=5)
    await bus.publish(model_call(trims=(window_move, TRIM)))

    (entry,) = read_entries(tmp_path)
    assert [(t.budget, t.dropped_turns) for t in entry.trims] == [(8000, 5), (6000, 3)]
    assert entry.trim == entry.trims[-1]
    report = build_report([entry], zone=UTC, days=[entry.ts.date()])
    assert report.total.trims == 2


async def test_a_model_call_is_one_ledger_line_and_the_sessions_meter(tmp_path: Path) -> None:
    bus = EventBus()
    metering = CallMetering(LedgerWriter(tmp_path, UTC)).attach(bus)

    await bus.publish(model_call())

    (entry,) = read_entries(tmp_path)
    assert (entry.session, entry.chat, entry.thread, entry.scene) == (7, -100, 3, "group")
    assert (entry.turn_id, entry.iteration, entry.purpose) == ("t1", 2, "turn")
    assert (entry.provider, entry.model) == ("main", "gpt-test")
    assert (entry.input_tokens, entry.cached_tokens, entry.output_tokens) == (
        1_000_000,
        500_000,
        1000,
    )
    assert (entry.est_fixed, entry.est_history, entry.est_current, entry.est_images) == (
        300,
        4000,
        200,
        765,
    )
    assert entry.cost == pytest.approx(1.0 + 0.25 + 0.008)
    assert entry.trim is not None
    assert (entry.trim.reason, entry.trim.dropped_turns, entry.trim.budget) == (
        "token_budget",
        3,
        6000,
    )
    assert (entry.latency_ms, entry.tool_calls, entry.error) == (120, 1, None)
    assert not entry.hit_iteration_cap

    meter = metering.meters.get(7)
    assert meter is not None
    assert (meter.model, meter.context_window, meter.budget, meter.history_budget) == (
        "gpt-test",
        128_000,
        100_000,
        6000,
    )
    assert meter.estimated_input == 300 + 4965
    assert (meter.reported_input, meter.cached_tokens) == (1_000_000, 500_000)
    assert (meter.kept_turns, meter.dropped_turns, meter.at) == (4, 3, AT)


async def test_a_failed_final_call_is_metered_without_usage_or_cost(tmp_path: Path) -> None:
    bus = EventBus()
    metering = CallMetering(LedgerWriter(tmp_path, UTC)).attach(bus)

    await bus.publish(
        model_call(final=True, usage=None, tool_calls=0, error=ProviderUnavailable("503"))
    )

    (entry,) = read_entries(tmp_path)
    assert (entry.purpose, entry.hit_iteration_cap) == ("final_summary", True)
    assert (entry.input_tokens, entry.cost) == (None, None)
    assert entry.error == "ProviderUnavailable: 503"
    meter = metering.meters.get(7)
    assert meter is not None
    assert meter.reported_input is None


async def test_meters_keep_the_most_recently_called_sessions(tmp_path: Path) -> None:
    bus = EventBus()
    metering = CallMetering(LedgerWriter(tmp_path, UTC), max_meters=2).attach(bus)
    for session_id in (1, 2, 1, 3):
        session = SessionInfo(id=session_id, key=SessionKey(chat_id=session_id), scene="group")
        await bus.publish(model_call(session=session))
    assert list(metering.meters) == [1, 3]


class HeldLedger(LedgerWriter):
    """Holds every write until released, noting the thread it ran on."""

    def __init__(self, traces_dir: Path) -> None:
        super().__init__(traces_dir, UTC)
        self.writing = threading.Event()
        self.release = threading.Event()
        self.threads: list[int] = []

    def _write_batch(self, entries: list[LedgerEntry]) -> list[OSError | None]:
        self.threads.append(threading.get_ident())
        self.writing.set()
        self.release.wait(timeout=deadline(EVENT))
        return super()._write_batch(entries)


async def test_a_slow_ledger_write_leaves_the_event_loop_free(tmp_path: Path) -> None:
    ledger = HeldLedger(tmp_path)
    bus = EventBus()
    CallMetering(ledger).attach(bus)

    publishing = asyncio.create_task(bus.publish(model_call()))
    await asyncio.to_thread(ledger.writing.wait, 5)
    # The write is in progress and held: the loop still runs other work meanwhile.
    other = asyncio.create_task(asyncio.sleep(0, result="ran"))
    assert await other == "ran"
    assert not publishing.done()

    ledger.release.set()
    await publishing
    assert ledger.threads
    assert threading.get_ident() not in ledger.threads
    assert len(list(read_entries(tmp_path))) == 1


async def test_every_call_of_a_real_turn_is_metered_in_order(
    tmp_path: Path, messenger: RecordingMessenger
) -> None:
    model = ScriptedModel(
        [CallTool("set_reaction", {"message_id": "m1", "emoji": "👍"}), Reply("Done.")]
    )
    app, store, clock = make_app(tmp_path, model, messenger)
    await say(app, clock, 1, "@Helper react to this please", mentions_bot=True)

    entries = list(read_entries(tmp_path / "agent-traces"))
    assert [(e.iteration, e.tool_calls) for e in entries] == [(1, 1), (2, 0)]
    assert len({e.turn_id for e in entries}) == 1
    session = await store.find_session(SessionKey(chat_id=CHAT))
    assert session is not None
    meter = app.runner.meters[session.id]
    assert meter.at == entries[-1].ts
    assert meter.estimated_input == entries[-1].est_total
    assert entries[-1].input_tokens is not None
    assert meter.reported_input == entries[-1].input_tokens


class WritesItsCache:
    """A provider with an Anthropic-shaped bill over the scripted model: of the input, what
    the scripted prefix cache did not hit is written to the cache (`cache_write_tokens`),
    and every usage it reported is kept, so a test compares the ledger with it."""

    def __init__(self, model: ScriptedModel) -> None:
        self.model = model
        self.reported: list[Usage] = []

    async def complete(
        self, request: LLMRequest, *, on_text: TextSink | None = None
    ) -> LLMResponse:
        response = await self.model.complete(request)
        assert response.usage is not None
        writes = max(0, response.usage.input_tokens - response.usage.cached_tokens - 7)
        usage = replace(response.usage, cache_write_tokens=writes)
        self.reported.append(usage)
        return replace(response, usage=usage)


async def test_the_ledger_carries_the_cache_writes_the_provider_reported(
    tmp_path: Path, messenger: RecordingMessenger
) -> None:
    provider = WritesItsCache(
        ScriptedModel([CallTool("set_reaction", {"message_id": "m1", "emoji": "👍"}), Reply("Ok.")])
    )
    app, store, clock = make_app(tmp_path, provider, messenger)  # type: ignore[arg-type]
    await say(app, clock, 1, "@Helper react to this please", mentions_bot=True)

    entries = list(read_entries(tmp_path / "agent-traces"))
    assert len(entries) == len(provider.reported) == 2
    for entry, usage in zip(entries, provider.reported, strict=True):
        assert entry.input_tokens == usage.input_tokens
        assert entry.cached_tokens == usage.cached_tokens
        assert entry.cache_write_tokens == usage.cache_write_tokens
    assert sum(e.cache_write_tokens or 0 for e in entries) > 0
    report = build_report(entries, zone=UTC, days=[entries[0].ts.date()])
    assert report.total.cache_write_tokens == sum(u.cache_write_tokens for u in provider.reported)
    session = await store.find_session(SessionKey(chat_id=CHAT))
    assert session is not None
    last_writes = provider.reported[-1].cache_write_tokens
    assert f"cache writes: {last_writes}" in app.commands.context_text(session)


async def test_cache_writes_are_priced_at_the_write_price(tmp_path: Path) -> None:
    bus = EventBus()
    CallMetering(LedgerWriter(tmp_path, UTC)).attach(bus)
    route = replace(ROUTE, prices=replace(ROUTE.prices, cache_write_per_mtok=2.5))
    usage = Usage(
        input_tokens=1_000_000,
        output_tokens=1000,
        cached_tokens=500_000,
        cache_write_tokens=300_000,
    )
    await bus.publish(model_call(route=route, usage=usage))

    (entry,) = read_entries(tmp_path)
    assert (entry.input_tokens, entry.cached_tokens, entry.cache_write_tokens) == (
        1_000_000,
        500_000,
        300_000,
    )
    # 200k uncached x 2.0 + 500k reads x 0.5 + 300k writes x 2.5 + 1k output x 8.0, per 1M
    assert entry.cost == pytest.approx(0.4 + 0.25 + 0.75 + 0.008)
    assert entry.cache_write_cost == pytest.approx(0.75)


class DropsTheOldest:
    """A provider that behaves like Ollama over its `num_ctx`: no error, the oldest
    messages silently dropped, and only what it kept counted as input."""

    def __init__(self, model: ScriptedModel, *, num_ctx: int) -> None:
        self.model = model
        self.num_ctx = num_ctx

    async def complete(
        self, request: LLMRequest, *, on_text: TextSink | None = None
    ) -> LLMResponse:
        response = await self.model.complete(request)
        assert response.usage is not None
        kept = min(response.usage.input_tokens, self.num_ctx)
        return replace(response, usage=replace(response.usage, input_tokens=kept, cached_tokens=0))


async def test_a_silently_truncated_call_is_flagged_warned_once_and_teaches_nothing(
    tmp_path: Path, messenger: RecordingMessenger, caplog: pytest.LogCaptureFixture
) -> None:
    provider = DropsTheOldest(ScriptedModel(), num_ctx=1024)
    app, store, clock = make_app(tmp_path, provider, messenger, group_tokens=20_000)  # type: ignore[arg-type]
    long_text = " ".join(f"line {n} of the incident log, all of it matters" for n in range(300))
    with caplog.at_level(logging.WARNING, logger="tgbot.runtime"):
        await say(app, clock, 1, f"@Helper read this: {long_text}", mentions_bot=True)
        await say(app, clock, 2, f"@Helper and this one: {long_text}", mentions_bot=True)
        await say(app, clock, 3, "@Helper thanks", mentions_bot=True)

    entries = list(read_entries(tmp_path / "agent-traces"))
    flagged = [e for e in entries if e.input_truncated_by_provider]
    assert len(flagged) >= 2, [(e.input_tokens, e.est_corrected) for e in entries]
    assert all(e.input_tokens == 1024 for e in flagged)
    assert all((e.est_corrected or 0) > 2 * 1024 for e in flagged)
    warnings = [r for r in caplog.records if "num_ctx" in r.getMessage()]
    assert len(warnings) == 1, "one warning per route"
    assert "reported 1024 input tokens" in warnings[0].getMessage()
    # a truncated call's ratio is the provider's cut: the correction must not learn it
    routes = app.runner.truth.routes
    assert not [state for state in routes.values() if state.ratio < 0.9], routes
    report = build_report(entries, zone=UTC, days=[entries[0].ts.date()])
    assert report.total.truncated_calls == len(flagged)
    session = await store.find_session(SessionKey(chat_id=CHAT))
    assert session is not None
    shown = app.commands.context_text(session)  # what the owner's /context says
    assert "dropped the oldest messages (Ollama: raise num_ctx)" in shown


async def test_without_prices_a_calls_cost_is_unknown_not_zero(tmp_path: Path) -> None:
    bus = EventBus()
    CallMetering(LedgerWriter(tmp_path, UTC)).attach(bus)
    await bus.publish(model_call(route=replace(ROUTE, prices=Prices())))

    (entry,) = read_entries(tmp_path)
    assert entry.input_tokens == 1_000_000
    assert entry.cost is None
    assert entry.cache_write_cost is None
    assert not Prices().configured
    assert Prices(cache_write_per_mtok=3.75).configured


@pytest.mark.parametrize(
    ("reported", "images", "flagged"),
    [
        (2_000, 0, True),  # 2k of a 5.2k request: cut
        (3_000, 0, False),  # a tighter tokenizer, not a cut
        (1_000, 0, True),
        (2_800, 3_000, False),  # the images were counted cheaply, the text is whole
    ],
    ids=["cut", "tight-tokenizer", "deep-cut", "cheap-images"],
)
async def test_which_calls_are_flagged_as_truncated(
    tmp_path: Path, reported: int, images: int, flagged: bool
) -> None:
    bus = EventBus()
    CallMetering(LedgerWriter(tmp_path, UTC)).attach(bus)
    await bus.publish(
        model_call(
            usage=Usage(input_tokens=reported, output_tokens=5),
            tokens=RequestTokens(history=4000, current=900, images=images, messages=4900),
        )
    )
    (entry,) = read_entries(tmp_path)
    assert entry.input_truncated_by_provider is flagged


async def test_a_small_request_is_never_flagged(tmp_path: Path) -> None:
    bus = EventBus()
    CallMetering(LedgerWriter(tmp_path, UTC)).attach(bus)
    small = RequestTokens(history=1200, current=300, images=0, messages=1500)
    await bus.publish(model_call(usage=Usage(input_tokens=100, output_tokens=5), tokens=small))
    (entry,) = read_entries(tmp_path)
    assert entry.est_total < 2048
    assert not entry.input_truncated_by_provider

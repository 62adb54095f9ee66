"""Token truth in the runtime: each ledger line teaches its route, carries `est_corrected`,
and the learned correction survives a restart and moves the budgets it is used by."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from datetime import UTC
from pathlib import Path

import pytest

from adapters.llm.scripted import ScriptedModel
from bot.agent.events import EventBus
from bot.agent.ledger import LedgerEntry
from bot.agent.ledger_file import LedgerWriter
from bot.agent.ledger_read import read_entries
from bot.agent.metering import CallMetering, TokenTruth
from bot.agent.token_corrections_file import FILE_NAME
from bot.errors import ConfigError
from bot.ports import LLMRequest, LLMResponse, TextSink, Usage
from testkit.memory_store import InMemoryStore
from tests.fakes import RecordingMessenger, SteppingClock
from tests.rig import rig_settings, wire_app
from tests.test_agent.rig import CHAT, START, model_call, say


class CountsDifferently:
    """A provider whose tokenizer counts `ratio` x what the scripted model estimates (the
    scripted model reports our own estimate as `input_tokens`)."""

    def __init__(self, ratio: float) -> None:
        self.model = ScriptedModel()
        self.ratio = ratio

    async def complete(
        self, request: LLMRequest, *, on_text: TextSink | None = None
    ) -> LLMResponse:
        response = await self.model.complete(request)
        assert response.usage is not None
        usage = replace(
            response.usage, input_tokens=round(response.usage.input_tokens * self.ratio)
        )
        return replace(response, usage=replace(usage, cached_tokens=0))


async def test_every_line_carries_the_corrected_estimate_and_teaches_the_route(
    tmp_path: Path,
) -> None:
    truth = TokenTruth.load(tmp_path)
    metering = CallMetering(LedgerWriter(tmp_path / "traces", UTC), truth=truth)
    bus = EventBus()
    metering.attach(bus)
    est_total = 300 + 4000 + 200 + 765
    for _ in range(25):
        await bus.publish(
            model_call(usage=Usage(input_tokens=round(est_total * 0.7), output_tokens=5))
        )
    lines = list(read_entries(tmp_path / "traces"))
    assert len(lines) == 25
    # the first call had nothing learned yet; by the twentieth the estimate is corrected
    assert lines[0].est_corrected == est_total
    assert abs(lines[-1].est_corrected / (est_total * 0.7) - 1) < 0.02  # type: ignore[operator]
    assert all(line.est_total == est_total for line in lines), "the raw split is kept"
    meter = metering.meters.get(7)
    assert meter is not None
    assert meter.corrected_input == lines[-1].est_corrected
    truth.flush()
    saved = json.loads((tmp_path / FILE_NAME).read_text())
    assert saved["routes"]["main/gpt-test"]["samples"] == 25


async def test_a_failed_call_teaches_nothing(tmp_path: Path) -> None:
    truth = TokenTruth.load(tmp_path)
    bus = EventBus()
    CallMetering(LedgerWriter(tmp_path / "traces", UTC), truth=truth).attach(bus)
    await bus.publish(model_call(usage=None, error=RuntimeError("boom")))
    (line,) = read_entries(tmp_path / "traces")
    assert line.est_corrected == line.est_total
    assert truth.routes == {}


async def _chat(
    app_dir: Path, store: InMemoryStore, provider: CountsDifferently, turns: int
) -> None:
    settings = rig_settings(app_dir, owner_id=42, history={"group_tokens": 700})
    clock = SteppingClock(START)
    app = wire_app(
        settings, store=store, messenger=RecordingMessenger(), model=provider, clock=clock
    )
    words = "deploy rollback config database migration meeting friday tickets"
    for n in range(turns):
        await say(
            app, clock, 100 + n, f"@bot please check the {words} number {n}", mentions_bot=True
        )
    await app.runner.aclose()  # the bot shuts down: what it learned is saved
    await app.routes.aclose()


async def test_the_correction_survives_a_restart_and_widens_an_over_counted_budget(
    tmp_path: Path,
) -> None:
    store = InMemoryStore()
    data = tmp_path / "data"
    # the provider counts half of what we estimate: our 700-token budget holds ~1,400
    await _chat(data, store, CountsDifferently(0.5), turns=24)
    learned = TokenTruth.load(data).routes
    (route,) = learned
    assert learned[route].samples >= 20
    assert abs(learned[route].ratio - 0.5) < 0.03

    # a restart: a new app over the same data dir and database
    settings = rig_settings(data, owner_id=42, history={"group_tokens": 700})
    restarted = wire_app(
        settings, store=store, messenger=RecordingMessenger(), model=ScriptedModel()
    )
    fresh_settings = rig_settings(tmp_path / "fresh", owner_id=42, history={"group_tokens": 700})
    fresh = wire_app(
        fresh_settings, store=store, messenger=RecordingMessenger(), model=ScriptedModel()
    )
    session = (await store.load_history(1, max_records=1)).session
    assert session.key.chat_id == CHAT
    kept = await restarted.runner.prepare(session, turn_id="p1", persist_window=False)
    plain = await fresh.runner.prepare(session, turn_id="p2", persist_window=False)
    assert kept.window.correction.ratio == learned[route].ratio
    assert plain.window.correction.samples == 0
    # same history, same 700-token budget: the corrected window keeps more of it
    assert kept.messages.tokens > plain.messages.tokens
    assert kept.layout.kept_turns > plain.layout.kept_turns
    await restarted.routes.aclose()
    await fresh.routes.aclose()


async def test_the_capacity_check_counts_in_real_tokens(tmp_path: Path) -> None:
    """A request our estimate puts over the window is sent when the route has learned that
    its provider counts half of that; without the correction it is refused before sending."""

    async def answered(data: Path, ratio: float | None) -> bool:
        settings = rig_settings(data, owner_id=42, llm_context_window=3_000)
        model = ScriptedModel()
        messenger = RecordingMessenger()
        clock = SteppingClock(START)
        app = wire_app(
            settings, store=InMemoryStore(), messenger=messenger, model=model, clock=clock
        )
        if ratio is not None:
            route = app.runner.windows.routes.resolve(None)
            truth = app.runner.truth
            for _ in range(40):
                truth.observe(
                    route.profile,
                    route.model,
                    estimated=10_000,
                    reported=round(10_000 * ratio),
                )
        await say(app, clock, 1, "@bot " + "long question " * 950, mentions_bot=True)
        await app.routes.aclose()
        return bool(model.requests)

    # ~3,800 estimated tokens, ~1,900 as this provider counts, against a 3,000-token window
    assert not await answered(tmp_path / "plain", None)
    assert await answered(tmp_path / "learned", 0.5)


def _byte_tokenizer(path: Path) -> Path:
    """A tiktoken file with no merges: every byte is one token (4x our ASCII estimate)."""
    path.write_text("".join(f"{base64.b64encode(bytes([b])).decode()} {b}\n" for b in range(256)))
    return path


async def test_an_exact_tokenizer_file_is_what_the_capacity_check_counts(tmp_path: Path) -> None:
    pytest.importorskip("tiktoken")
    tokenizer = _byte_tokenizer(tmp_path / "bytes.tiktoken")

    async def run(data: Path, **env: object) -> tuple[bool, list[LedgerEntry]]:
        settings = rig_settings(data, owner_id=42, llm_context_window=12_000, **env)
        model = ScriptedModel()
        clock = SteppingClock(START)
        app = wire_app(
            settings,
            store=InMemoryStore(),
            messenger=RecordingMessenger(),
            model=model,
            clock=clock,
        )
        await say(app, clock, 1, "@bot " + "plain ascii words " * 500, mentions_bot=True)
        await app.routes.aclose()
        return bool(model.requests), list(read_entries(settings.traces_dir))

    # our estimate (~4 bytes a token) fits the window: sent
    sent, lines = await run(tmp_path / "estimate")
    assert sent
    assert lines[0].est_corrected == lines[0].est_total
    # counted byte by byte, the same request does not fit: refused before sending, and
    # the ledger line says how much the tokenizer counted
    sent, lines = await run(tmp_path / "exact", llm_tokenizer_file=tokenizer)
    assert not sent
    (line,) = lines
    assert line.error is not None
    assert "CapacityExceeded" in line.error
    assert line.est_corrected is not None
    assert line.est_corrected > 12_000 > line.est_total


def test_a_tokenizer_file_that_cannot_be_read_stops_the_start(tmp_path: Path) -> None:
    settings = rig_settings(tmp_path, owner_id=42, llm_tokenizer_file=tmp_path / "absent.json")
    with pytest.raises(ConfigError, match="llm_tokenizer_file"):
        wire_app(settings, store=InMemoryStore(), messenger=RecordingMessenger())

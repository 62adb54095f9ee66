"""Token corrections across workers (`storage.token_corrections`): both workers' calls move
one shared correction, as many steps as calls, instead of each learning from half of them
and the last writer winning."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from adapters.llm.scripted import ScriptedModel
from bot.agent.token_truth import TokenTruth, route_key
from bot.context.token_correction import NO_CORRECTION, observe
from storage.engine import create_engine_for
from storage.sql import SqlStore
from storage.token_corrections import SqlTokenCorrections
from tests.fakes import RecordingMessenger
from tests.rig import rig_settings, wire_app
from tests.test_scaleout.conftest import fresh_postgres

pytestmark = pytest.mark.postgres

ROUTE = ("offline", "demo")
CALLS = 20


async def test_both_workers_calls_move_one_shared_correction(tmp_path: Path) -> None:
    url = await fresh_postgres()
    stores = [SqlStore(create_engine_for(url)) for _ in range(2)]
    try:
        # as `tgbot run` wires them: each app's book is backed by the shared table
        truths: list[TokenTruth] = []
        for n, store in enumerate(stores):
            app = wire_app(
                rig_settings(tmp_path / f"w{n}"), store=store,
                messenger=RecordingMessenger(), model=ScriptedModel(),
            )  # fmt: skip
            assert isinstance(app.runner.truth.shared, SqlTokenCorrections)
            truths.append(app.runner.truth)
            await app.routes.aclose()
        for n in range(CALLS):  # the provider counts twice our estimate; calls alternate
            truths[n % 2].observe(*ROUTE, estimated=1000, reported=2000)
        await asyncio.gather(*(t.shared_settled() for t in truths))

        expected = NO_CORRECTION
        for _ in range(CALLS):
            expected = observe(expected, estimated=1000, reported=2000)
        shared = await SqlTokenCorrections(stores[0].engine).load()
        assert shared[route_key(*ROUTE)].samples == CALLS  # every call of both workers
        assert shared[route_key(*ROUTE)].ratio == pytest.approx(expected.ratio)
        # each worker's copy follows the shared row, not its own half of the calls
        for truth in truths:
            assert truth.correction(*ROUTE).samples > CALLS // 2
    finally:
        for store in stores:
            await store.close()


async def test_a_restarted_worker_starts_from_the_shared_table_not_its_file(
    tmp_path: Path,
) -> None:
    url = await fresh_postgres()
    store = SqlStore(create_engine_for(url))
    try:
        shared = SqlTokenCorrections(store.engine)
        for _ in range(CALLS):  # what the other workers learned meanwhile
            await shared.observe(route_key(*ROUTE), estimated=1000, reported=2000)
        stale = TokenTruth(tmp_path / "w" / "token-corrections.json")
        stale.observe(*ROUTE, estimated=1000, reported=1000)
        stale.flush()  # this worker's own file: one call, no correction
        app = wire_app(
            rig_settings(tmp_path / "w"), store=store,
            messenger=RecordingMessenger(), model=ScriptedModel(),
        )  # fmt: skip
        await app.routes.aclose()
        truth = app.runner.truth
        assert truth.correction(*ROUTE).samples == 1  # before start-up: its file
        await truth.load_shared()  # what `tgbot run` does before its first update
        assert truth.correction(*ROUTE) == (await shared.load())[route_key(*ROUTE)]
        assert truth.correction(*ROUTE).samples == CALLS
    finally:
        await store.close()

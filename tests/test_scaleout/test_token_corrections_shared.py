"""Token corrections across workers (`storage.token_corrections`): both workers' calls move
one shared correction, counting every call once, instead of each learning from half of them
and the last writer winning; with no row every call locks."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import sqlalchemy as sa

from adapters.llm.scripted import ScriptedModel
from bot.agent.metering import TokenTruth, route_key
from bot.context.tokens import NO_CORRECTION, observe
from storage.engine import create_engine_for
from storage.sql import SqlStore
from storage.token_corrections import SqlTokenCorrections
from tests.deadlines import EVENT, deadline
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
        await asyncio.gather(*(t.flush_shared() for t in truths))  # as at shutdown

        alone = NO_CORRECTION  # what one worker learns from its half of the calls
        for _ in range(CALLS // 2):
            alone = observe(alone, estimated=1000, reported=2000)
        shared = await SqlTokenCorrections(stores[0].engine).load()
        assert shared[route_key(*ROUTE)].samples == CALLS  # every call of both workers
        assert shared[route_key(*ROUTE)].ratio >= alone.ratio
        assert shared[route_key(*ROUTE)].ratio <= 2.0
        # each worker adopts the shared state, not its own half of the calls
        for truth in truths:
            await truth.load_shared()
            assert truth.correction(*ROUTE) == shared[route_key(*ROUTE)]
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
        learned = NO_CORRECTION
        for _ in range(CALLS):  # what the other workers learned meanwhile
            learned = observe(learned, estimated=1000, reported=2000)
        await shared.publish({route_key(*ROUTE): learned})
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


async def test_a_worker_publishes_while_another_holds_its_transaction_open(
    tmp_path: Path,
) -> None:
    """No shared row is locked: one worker's publication does not wait for another's."""
    url = await fresh_postgres()
    engine = create_engine_for(url)
    try:
        slow, fast = (SqlTokenCorrections(engine, worker=name) for name in ("slow", "fast"))
        state = observe(NO_CORRECTION, estimated=1000, reported=2000)
        await slow.publish({route_key(*ROUTE): state})
        async with engine.begin() as conn:  # the slow worker's upsert, not yet committed
            await conn.execute(
                sa.text("UPDATE token_correction_workers SET samples = 5 WHERE worker = 'slow'")
            )
            async with asyncio.timeout(deadline(EVENT)):
                merged = await fast.publish({route_key(*ROUTE): state})
        assert merged[route_key(*ROUTE)].samples == 2  # the slow row as last committed
    finally:
        await engine.dispose()

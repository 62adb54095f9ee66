"""Two `tgbot run --webhook` workers on one PostgreSQL keep a group under Telegram's 20
messages a minute together: the pacing books are shared (`storage.send_pacing`)."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from pathlib import Path

import aiohttp
import pytest

from testkit.fake_bot_api import FakeBotApi
from tests.deadlines import EVENT, deadline
from tests.test_scaleout.conftest import fresh_postgres
from tests.test_scaleout.workers import Worker, post, worker_env

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

GROUP = -100900
MEMBERS = (7001, 7002)


async def test_two_workers_send_at_most_20_a_minute_to_one_group(tmp_path: Path) -> None:
    url = await fresh_postgres(migrate=False)
    async with AsyncExitStack() as stack:
        api = await stack.enter_async_context(FakeBotApi())
        http = await stack.enter_async_context(aiohttp.ClientSession())
        workers = [
            Worker(
                f"worker-{n}",
                worker_env(
                    api,
                    tmp_path / f"data-{n}",
                    DATABASE_URL=url,
                    TRIGGERS__MERGE_WINDOW_SECONDS="0",
                ),
            )
            for n in (1, 2)
        ]
        for worker in workers:
            stack.push_async_callback(worker.kill)
        await asyncio.gather(*(w.start() for w in workers))

        for n in range(22):  # each worker gets every other question, asked once answered
            update = api.user_message(GROUP, MEMBERS[n % 2], f"@{api.username} question {n}")
            assert await post(http, workers[n % 2], {"update_id": n + 1, **update}) == 200
            await api.wait_for_call("sendMessage", n + 1, timeout=deadline(EVENT) + 61)
        codes = await asyncio.gather(*(w.stop() for w in workers))
        assert codes == [0, 0], "\n\n".join(w.output for w in workers)

    times = [at for at, _name, _params in api.timed_calls("sendMessage")]
    assert len(times) == 22
    assert max(sum(1 for t in times if start <= t < start + 60) for start in times) <= 20
    assert times[20] - times[0] >= 60
    answered = {m["reply_to_message"]["message_id"] for m in api.sent_messages(GROUP)}
    assert len(answered) == 22

"""Spend limits across two `tgbot run --webhook` workers on one PostgreSQL (`storage.spend`):
twelve chats ask at once, half through each worker, while the model is slow enough that
calls overlap; the bot's daily budget of 5,000 billable-equivalent tokens (1,000 a call)
admits the call that reaches it and at most one more in flight, never a third, and every
refused chat is told once."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from pathlib import Path

import aiohttp
import pytest

from adapters.llm.scripted import ScriptedModel
from bot.agent.spend import periods_at
from bot.agent.spend_counters import Counter
from bot.ports import LLMRequest, LLMResponse, Usage
from storage.engine import create_engine_for
from storage.spend import SqlSpendCounters
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer
from tests.deadlines import EVENT, deadline
from tests.test_scaleout.conftest import fresh_postgres
from tests.test_scaleout.workers import Worker, post, worker_env

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

CHATS = tuple(range(801, 813))
CALL_TOKENS = 1_000
DAILY_TOKENS = 5_000


def thousand_tokens(request: LLMRequest) -> LLMResponse:
    return LLMResponse(text="ok", usage=Usage(input_tokens=CALL_TOKENS, output_tokens=0))


async def test_two_workers_pass_a_budget_by_one_call_at_most(tmp_path: Path) -> None:
    url = await fresh_postgres(migrate=False)
    model = ScriptedModel(default=thousand_tokens)
    async with AsyncExitStack() as stack:
        http = await stack.enter_async_context(aiohttp.ClientSession())
        api = await stack.enter_async_context(FakeBotApi())
        llm = await stack.enter_async_context(FakeOpenAIServer(model, delay=0.2))
        workers = [
            Worker(
                f"worker-{n}",
                worker_env(
                    api,
                    tmp_path / f"data-{n}",
                    DATABASE_URL=url,
                    LLM_BASE_URL=llm.base_url,
                    TRIGGERS__MERGE_WINDOW_SECONDS="0",
                    TELEGRAM__STREAM_DRAFTS="false",
                    LIMITS__DAILY_TOKENS=str(DAILY_TOKENS),
                ),
            )
            for n in (1, 2)
        ]
        for worker in workers:
            stack.push_async_callback(worker.kill)
        await asyncio.gather(*(w.start() for w in workers))

        updates = [
            {"update_id": n, **api.user_message(chat, chat, f"hello {n}", chat_type="private")}
            for n, chat in enumerate(CHATS, start=1)
        ]
        statuses = await asyncio.gather(
            *(post(http, workers[n % 2], u) for n, u in enumerate(updates))
        )
        assert set(statuses) == {200}
        await api.wait_for_call("sendMessage", len(CHATS), timeout=deadline(EVENT))
        codes = await asyncio.gather(*(w.stop() for w in workers))
        assert codes == [0, 0], "\n\n".join(w.output for w in workers)

    calls = len(llm.requests)
    replies = {chat: [m["text"] for m in api.sent_messages(chat)] for chat in CHATS}
    assert all(len(texts) == 1 for texts in replies.values()), replies
    answered = [chat for chat, texts in replies.items() if texts == ["ok"]]
    refused = [chat for chat, texts in replies.items() if "daily limit" in texts[0]]
    assert len(answered) == calls
    assert len(answered) + len(refused) == len(CHATS)
    # 5 calls reach the budget; one more may have been in flight; never a 7th
    assert DAILY_TOKENS // CALL_TOKENS <= calls <= DAILY_TOKENS // CALL_TOKENS + 1
    engine = create_engine_for(url)
    try:
        from datetime import UTC, datetime

        day = periods_at(datetime.now(UTC), UTC).day
        counters = SqlSpendCounters(engine)
        spent = (await counters.totals([Counter("day", day)]))[Counter("day", day)]
        assert spent.tokens == calls * CALL_TOKENS
    finally:
        await engine.dispose()

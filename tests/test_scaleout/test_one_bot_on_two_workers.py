"""Two real `tgbot run --webhook` workers on one PostgreSQL behave as one bot.

One pair of workers serves the whole module, behind a round-robin proxy written here (as any
load balancer would spread updates), with the fake Bot API and one model behind the fake
OpenAI server for both. In order:

- a member's 40 messages, spread over both workers, are limited as one member (10 a minute);
- `/help` answered by one worker is in `[Already told the user]` of the next turn, which the
  other worker runs (asserted on what the model received);
- both workers' model calls move the one shared token correction;
- the dashboard served by one worker streams (`/events`) the model call the other made;
- a worker SIGKILLed in the middle of a turn: the other, running on, finds the orphaned turn
  (its scan, every `RUNTIME__ORPHAN_SCAN_SECONDS`, shortened here) and answers it; the killed
  one restarting after it finds nothing left: one answer, once.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web

from adapters.telegram.webhook import WEBHOOK_PATH
from bot.agent.ledger_read import read_entries
from bot.domain.ids import SessionKey
from bot.domain.records import UserRecord
from bot.ports import LLMRequest, LLMResponse, TextSink, Usage
from bot.services.told_lines import told_line
from bot.texts import text
from storage.engine import create_engine_for
from storage.sql import SqlStore
from storage.token_corrections import SqlTokenCorrections
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer
from tests.bot_process import eventually
from tests.deadlines import EVENT, deadline
from tests.test_scaleout.conftest import fresh_postgres
from tests.test_scaleout.workers import Worker, free_port, post, worker_env

pytestmark = [
    pytest.mark.slow,
    pytest.mark.postgres,
    pytest.mark.asyncio(loop_scope="module"),
]

PER_MINUTE = 10
HANG = "please-hang"
TOLD = "[Already told the user]"
ORPHAN_SCAN_SECONDS = 0.5
"""How often each worker scans for orphaned turns (25 s by default)."""
REPORTED_INPUT = 5000
"""What the model reports for every request: far from our estimate, so each call moves the
correction."""


class Model:
    """The model both workers call (through the fake OpenAI server): answers `re <text>`,
    reports `REPORTED_INPUT`, and holds the first request whose message says `HANG` until
    `release` is set (a turn in flight)."""

    def __init__(self) -> None:
        self.requests: list[LLMRequest] = []
        self.hanging = asyncio.Event()
        self.release = asyncio.Event()

    async def complete(
        self, request: LLMRequest, *, on_text: TextSink | None = None
    ) -> LLMResponse:
        self.requests.append(request)
        user = next(m.content for m in reversed(request.messages) if m.role == "user")
        if HANG in user and not self.hanging.is_set():
            self.hanging.set()
            await self.release.wait()
        said = user.split("\n")[1] if "\n" in user else user
        return LLMResponse(
            text=f"re {said}", usage=Usage(input_tokens=REPORTED_INPUT, output_tokens=5)
        )


@dataclass
class RoundRobin:
    """A load balancer in front of the workers: each update to the next worker in turn;
    `routed` says which worker got which update."""

    workers: list[Worker]
    http: aiohttp.ClientSession
    routed: dict[int, str] = field(default_factory=dict)
    _next: itertools.cycle[int] = field(init=False)
    url: str = ""

    def __post_init__(self) -> None:
        self._next = itertools.cycle(range(len(self.workers)))

    async def forward(self, request: web.Request) -> web.Response:
        body = await request.read()
        worker = self.workers[next(self._next)]
        self.routed[int(json.loads(body)["update_id"])] = worker.name
        async with self.http.post(
            worker.url + WEBHOOK_PATH, data=body, headers=dict(request.headers)
        ) as answer:
            return web.Response(status=answer.status, body=await answer.read())


@dataclass
class Pair:
    api: FakeBotApi
    model: Model
    workers: list[Worker]
    proxy: RoundRobin
    http: aiohttp.ClientSession
    store: SqlStore
    dashboards: dict[str, int]
    update_ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def worker(self, name: str) -> Worker:
        return next(w for w in self.workers if w.name == name)

    async def say(self, chat: int, user: int, words: str) -> tuple[int, int]:
        """A private message through the proxy; returns its update id and message id."""
        update_id = next(self.update_ids)
        update = {
            "update_id": update_id,
            **self.api.user_message(chat, user, words, chat_type="private"),
        }
        assert await post(self.http, self.proxy.url, update) == 200
        return update_id, int(update["message"]["message_id"])


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def pair(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Pair]:
    url = await fresh_postgres(migrate=False)  # the workers migrate it, one at a time
    root = tmp_path_factory.mktemp("workers")
    model = Model()
    async with AsyncExitStack() as stack:
        api = await stack.enter_async_context(FakeBotApi(username="pair_bot"))
        llm = await stack.enter_async_context(FakeOpenAIServer(model))
        http = await stack.enter_async_context(aiohttp.ClientSession())
        dashboards = {name: free_port() for name in ("A", "B")}
        workers = [
            Worker(
                name,
                worker_env(
                    api,
                    root / name,
                    DATABASE_URL=url,
                    LLM_BASE_URL=llm.base_url,
                    LLM_API_KEY="sk-test",
                    LLM_MODEL="fake-model",
                    DASHBOARD_PORT=str(port),
                    TRIGGERS__MERGE_WINDOW_SECONDS="0",
                    RUNTIME__ORPHAN_SCAN_SECONDS=str(ORPHAN_SCAN_SECONDS),
                    SECURITY__USER_MESSAGES_PER_MINUTE=str(PER_MINUTE),
                ),
            )
            for name, port in dashboards.items()
        ]
        for worker in workers:
            stack.push_async_callback(worker.kill)
        stack.callback(model.release.set)  # a held answer must not keep the server open
        await asyncio.gather(*(w.start() for w in workers))
        proxy = RoundRobin(workers, http)
        app = web.Application()
        app.router.add_post(WEBHOOK_PATH, proxy.forward)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        stack.push_async_callback(runner.cleanup)
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        proxy.url = f"http://127.0.0.1:{port}"
        store = SqlStore(create_engine_for(url))
        stack.push_async_callback(store.close)
        yield Pair(api, model, workers, proxy, http, store, dashboards)
        codes = await asyncio.gather(*(w.stop() for w in workers))
        assert codes == [0, 0], "\n".join(w.output for w in workers)


async def stored_user_records(store: SqlStore, chat: int) -> list[UserRecord]:
    session = await store.find_session(SessionKey(chat_id=chat))
    if session is None:
        return []
    path = await store.load_path(session.id)
    return [r.body for r in path if isinstance(r.body, UserRecord)]


async def test_a_members_40_messages_over_both_workers_are_limited_as_one(pair: Pair) -> None:
    chat = 8101
    words = [f"flood {n}" for n in range(40)]
    first_minute = int(time.time() // 60)
    for said in words:
        await pair.say(chat, chat, said)
    assert {pair.proxy.routed[n] for n in range(1, 41)} == {"A", "B"}  # spread over both

    async def all_stored() -> bool:
        return len(await stored_user_records(pair.store, chat)) == len(words)

    await eventually(all_stored)
    records = await stored_user_records(pair.store, chat)
    admitted = [r for r in records if not r.refused]
    # one member's limit, not one per worker (2 × 10); a burst that straddles a minute
    # boundary may let one more in (the previous minute is carried pro rata)
    texts = [r.text for r in admitted]
    assert PER_MINUTE <= len(admitted) <= PER_MINUTE + 1, texts
    # the first PER_MINUTE in the order said; the one more a new minute lets in may come
    # after some were refused
    assert texts[:PER_MINUTE] == words[:PER_MINUTE]
    assert texts == sorted(texts, key=words.index)
    refusals = [m for m in pair.api.sent_messages(chat) if m["text"] == text("en", "rate_limited")]
    # told once a wall-clock minute, by whichever worker refused first: once in each minute
    # the flood (and its refusals) touched
    minutes = int(time.time() // 60) - first_minute + 1
    assert 1 <= len(refusals) <= minutes, (len(refusals), minutes)


async def test_a_command_answered_on_one_worker_is_told_to_the_next_turn_on_the_other(
    pair: Pair,
) -> None:
    chat = 8102
    # counted in this chat: an earlier test's paced replies may still be going out
    sent = len(pair.api.sent_messages(chat))
    helped, _ = await pair.say(chat, chat, "/help")
    await pair.api.wait_for_sent(chat, sent + 1, timeout=deadline(EVENT))
    asked, _ = await pair.say(chat, chat, "what now?")
    assert pair.proxy.routed[helped] != pair.proxy.routed[asked]  # two workers
    await pair.api.wait_for_sent(chat, sent + 2, timeout=deadline(EVENT))
    turn = next(r for r in reversed(pair.model.requests) if "what now?" in r.messages[-1].content)
    assert f"{TOLD}\n- {told_line(text('en', 'help'))}" in turn.messages[-1].content
    again, _ = await pair.say(chat, chat, "and then?")
    await pair.api.wait_for_sent(chat, sent + 3, timeout=deadline(EVENT))
    assert pair.proxy.routed[again] == pair.proxy.routed[helped]
    later = next(r for r in reversed(pair.model.requests) if "and then?" in r.messages[-1].content)
    assert TOLD not in later.messages[-1].content  # told once, then forgotten by both


async def test_both_workers_calls_move_one_shared_correction(pair: Pair) -> None:
    shared = SqlTokenCorrections(pair.store.engine)
    ledgers = {w.name: Path(w.env["DATA_DIR"]) / "agent-traces" for w in pair.workers}

    def calls_in(name: str) -> int:
        return sum(1 for entry in read_entries(ledgers[name]) if entry.input_tokens)

    async def settled() -> bool:
        samples = sum(c.samples for c in (await shared.load()).values())
        return samples == len(pair.model.requests) == calls_in("A") + calls_in("B")

    await eventually(settled)
    routes = await shared.load()
    assert list(routes) == ["default/fake-model"]  # one correction for the route
    assert calls_in("A") > 0
    assert calls_in("B") > 0
    assert routes["default/fake-model"].ratio > 1  # the model counts more than we estimate


async def test_the_dashboard_of_one_worker_streams_the_other_workers_calls(pair: Pair) -> None:
    chat = 8103
    streams = {}
    for name, port in pair.dashboards.items():
        streams[name] = await pair.http.get(f"http://127.0.0.1:{port}/events")
        assert (await streams[name].content.readline()).startswith(b"retry:")
    try:
        update_id, _ = await pair.say(chat, chat, "watch me")
        served_by = pair.proxy.routed[update_id]
        other = next(name for name in pair.dashboards if name != served_by)
        event = await next_model_call(streams[other], chat)
        assert event["purpose"] == "turn"
        assert event["model"] == "fake-model"
        assert event["input_tokens"] == REPORTED_INPUT
        own = await next_model_call(streams[served_by], chat)  # and its own, as before
        assert own["call_id"] == event["call_id"]
    finally:
        for stream in streams.values():
            stream.close()


async def next_model_call(stream: aiohttp.ClientResponse, chat: int) -> dict[str, Any]:
    """The next `model_call` event of `chat` on a server-sent events stream."""
    kind = ""
    async with asyncio.timeout(deadline(EVENT)):
        while True:
            line = (await stream.content.readline()).decode().rstrip("\n")
            if line.startswith("event: "):
                kind = line.removeprefix("event: ")
            elif line.startswith("data: ") and kind == "model_call":
                data: dict[str, Any] = json.loads(line.removeprefix("data: "))
                if data["chat"] == chat:
                    return data


async def test_a_worker_killed_mid_turn_is_recovered_by_the_other_exactly_once(
    pair: Pair,
) -> None:
    chat = 8104
    update_id, message_id = await pair.say(chat, chat, HANG)
    async with asyncio.timeout(deadline(EVENT)):
        await pair.model.hanging.wait()  # the turn is at the model
    killed = pair.worker(pair.proxy.routed[update_id])
    survivor = next(w for w in pair.workers if w is not killed)
    sent_before = len(pair.api.calls_of("sendMessage"))
    await killed.kill()
    pair.model.release.set()  # the answer comes too late: nobody reads it
    assert pair.api.sent_messages(chat) == []

    # the survivor, running on, finds the orphaned turn (its scan) and answers it
    await pair.api.wait_for_call("sendMessage", sent_before + 1, timeout=deadline(EVENT))

    async def survivor_logged() -> bool:  # its stderr is read apart from the Bot API
        return any("recovered 1 orphaned turn(s)" in line for line in survivor.this_start())

    await eventually(survivor_logged)
    await killed.start()  # back: it finds the turn answered and recovers nothing
    assert not any("recovered" in line for line in killed.this_start()), killed.output
    replies = pair.api.sent_messages(chat)
    assert [r["text"] for r in replies] == [f"re {HANG}"]
    assert replies[0]["reply_to_message"]["message_id"] == message_id

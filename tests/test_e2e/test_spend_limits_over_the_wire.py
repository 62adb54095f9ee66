"""Spend limits through `tgbot run` (README, Spend limits): every call of the scripted model
reports 10,000 input tokens, so with an input price of 1.00 per million each costs exactly
0.01 (and 10,000 billable-equivalent tokens without prices).

A member's limit stops that member only, after exactly the call that reaches it, with one
notice and then silence; the chat's limit stops the chat with one notice; the monthly limit
stops everyone but the owner, who hears once at 80 % and once at 100 %; a refused call is a
`refused: budget` ledger line and no model request; after a restart the spend is still
there. The same run with token budgets and no prices."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from adapters.llm.scripted import ScriptedModel, last_user_body
from bot.agent.ledger_read import read_entries
from bot.ports import LLMRequest, LLMResponse, Usage
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer
from tests.bot_process import BotProcess, eventually

pytestmark = pytest.mark.slow

GROUP = -1001234500
ALICE = {"id": 1001, "first_name": "Alice"}
BOB = {"id": 1002, "first_name": "Bob"}
CAROL = {"id": 1003, "first_name": "Carol"}
ERIN = {"id": 1005, "first_name": "Erin"}
OWNER = 42
CALL_TOKENS = 10_000


def costly(request: LLMRequest) -> LLMResponse:
    """Every call: 10,000 input tokens, no output (0.01 at 1.00 per million)."""
    return LLMResponse(
        text=f"ok: {last_user_body(request).removeprefix('@test_bot ')}",
        usage=Usage(input_tokens=CALL_TOKENS, output_tokens=0),
    )


PRICED = """\
[limits]
member_daily_cost = 0.03
chat_daily_cost = 0.05
monthly_cost = 0.08

[limits.private]          # no member limit in private chats: the chat's own applies
member_daily_cost = 0
"""
TOKENS = """\
[limits]
member_daily_tokens = 30000
chat_daily_tokens = 50000
monthly_tokens = 80000

[limits.private]
member_daily_tokens = 0
"""


def config(llm: FakeOpenAIServer, limits: str, *, priced: bool) -> str:
    price = "price_input_per_mtok = 1.0\n" if priced else ""
    return f"""\
default_provider = "fake"

[providers.fake]
base_url = "{llm.base_url}"
api_key_env = "LLM_API_KEY"
model = "fake-model"
{price}
[compaction]
enabled = false

[triggers]
merge_window_seconds = 0

[security]
user_messages_per_minute = 0
chat_messages_per_minute = 0

{limits}"""


class Run(NamedTuple):
    api: FakeBotApi
    llm: FakeOpenAIServer
    bot: BotProcess


@asynccontextmanager
async def limited_bot(tmp_path: Path, limits: str) -> AsyncIterator[Run]:
    """`tgbot run` with `limits`, the route priced when they are costs."""
    async with (
        FakeBotApi(username="test_bot") as api,
        FakeOpenAIServer(ScriptedModel(default=costly)) as llm,
    ):
        path = tmp_path / "bot.toml"
        path.write_text(config(llm, limits, priced="_cost" in limits), encoding="utf-8")
        bot = BotProcess(
            api,
            llm,
            tmp_path,
            LLM_API_KEY="sk-test",
            OWNER_ID=str(OWNER),
            BOT_CONFIG=str(path),
            BOT_LOCALE="en",
        )
        try:
            await bot.start()
            yield Run(api, llm, bot)
        finally:
            if bot.process is not None:
                code = await bot.stop()
                assert code == 0, bot.log_tail()


def refused_lines(data_dir: Path) -> int:
    return sum(1 for e in read_entries(data_dir / "agent-traces") if e.refused == "budget")


class Chat:
    """Sends as one member and waits for what the bot does about it."""

    def __init__(self, run: Run, data_dir: Path, chat_id: int, user: dict[str, Any]) -> None:
        self.run = run
        self.data_dir = data_dir
        self.chat_id = chat_id
        self.user = user

    @property
    def private(self) -> bool:
        return self.chat_id > 0

    def texts(self) -> list[str]:
        return [str(m.get("text", "")) for m in self.run.api.sent_messages(self.chat_id)]

    def push(self, words: str) -> None:
        api = self.run.api
        if self.private:
            api.push_update(api.user_message(self.chat_id, self.user, words, chat_type="private"))
        else:
            api.push_update(api.user_message(self.chat_id, self.user, f"@test_bot {words}"))

    async def answered(self, words: str) -> str:
        """Send; the bot answers with the model's reply or a notice: that text."""
        before = len(self.texts())
        self.push(words)
        await eventually(lambda: _more(self.texts, before))
        return self.texts()[before]

    async def silenced(self, words: str) -> None:
        """Send; the bot refuses without a word (a `refused: budget` line, no model call)."""
        before, calls = len(self.texts()), len(self.run.llm.requests)
        refused = refused_lines(self.data_dir)
        self.push(words)

        async def logged() -> bool:
            return refused_lines(self.data_dir) > refused

        await eventually(logged)
        assert len(self.texts()) == before
        assert len(self.run.llm.requests) == calls


async def _more(texts: Any, count: int) -> bool:
    return len(texts()) > count


def owner_notes(run: Run) -> list[str]:
    return [
        str(m.get("text", ""))
        for m in run.api.sent_messages(OWNER)
        if "budget" in str(m.get("text", ""))
    ]


@pytest.mark.parametrize("limits", [PRICED, TOKENS], ids=["cost", "tokens"])
async def test_budgets_stop_members_chats_and_the_bot_and_survive_a_restart(
    tmp_path: Path, limits: str
) -> None:
    async with limited_bot(tmp_path, limits) as run:
        alice = Chat(run, tmp_path, GROUP, ALICE)
        bob = Chat(run, tmp_path, GROUP, BOB)
        carol = Chat(run, tmp_path, CAROL["id"], CAROL)
        owner = Chat(run, tmp_path, OWNER, {"id": OWNER, "first_name": "Owner"})
        # a member: three calls reach 0.03; the fourth message gets one notice, then silence
        for n in range(3):
            assert await alice.answered(f"alice {n}") == f"ok: alice {n}"
        assert "You have reached your daily limit here; it resets at 00:00 UTC" in (
            await alice.answered("alice 3")
        )
        await alice.silenced("alice 4")
        assert len(run.llm.requests) == 3
        # ... that member only: Bob goes on until the chat reaches 0.05
        for n in range(2):
            assert await bob.answered(f"bob {n}") == f"ok: bob {n}"
        assert "This chat has reached its daily limit" in await bob.answered("bob 2")
        await bob.silenced("bob 3")
        await alice.silenced("alice 5")
        # the month: 0.06 and 0.07 (the owner hears of 80 %), 0.08 (and of 100 %)
        assert await carol.answered("carol 0") == "ok: carol 0"
        assert owner_notes(run) == []
        assert await carol.answered("carol 1") == "ok: carol 1"
        assert len(owner_notes(run)) == 1
        assert "88%" in owner_notes(run)[0]
        assert await carol.answered("carol 2") == "ok: carol 2"
        assert len(owner_notes(run)) == 2
        assert "is spent" in owner_notes(run)[1]
        assert "reached my monthly limit" in await carol.answered("carol 3")
        # the owner is exempt: answered, counted, and told nothing more
        assert await owner.answered("owner 0") == "ok: owner 0"
        assert len(owner_notes(run)) == 2
        assert len(run.llm.requests) == 9
        assert refused_lines(tmp_path) == 6
        # `/budget`: the month at 0.09 of 0.08 (the owner's call counts, never refused), the
        # group first among today's chats, Alice first among its members
        report = await owner.answered("/budget")
        assert "this month" in report
        assert "(112%)" in report
        top_chat = report.split("top chats today:\n")[1].splitlines()[0]
        assert top_chat.strip().startswith(f"{GROUP}: ")
        top_member = report.split("top members today:\n")[1].splitlines()[0]
        assert top_member.strip().startswith(f"{ALICE['id']} in {GROUP}: ")
        assert "only the bot's owner" in await carol.answered("/budget")
        # a restart keeps the spend: a new chat is refused at once, and told once
        assert await run.bot.stop() == 0, run.bot.log_tail()
        await run.bot.start()
        erin = Chat(run, tmp_path, ERIN["id"], ERIN)
        assert "reached my monthly limit" in await erin.answered("erin 0")
        await erin.silenced("erin 1")
        await carol.silenced("carol 4")
        assert len(run.llm.requests) == 9

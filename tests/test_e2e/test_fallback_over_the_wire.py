"""Issue 49: a primary route that is down hands the turn to its fallback, through `tgbot run`.

Two fake OpenAI-compatible servers stand for two providers: `[providers.main]` (with
`fallbacks = ["backup"]`) and `[providers.backup]`. The member writes in a private chat;
each answer says which server wrote it. Every attempt is a ledger line naming its `route`
and `fallback_from`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from adapters.llm.scripted import CallTool, Fail, Reply, ScriptedModel, last_user_body
from bot.errors import ProviderUnavailable
from bot.ports import LLMRequest, LLMResponse
from storage.sql import SqlStore
from testkit.fake_anthropic import FakeAnthropicServer
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_reasoning import ClaudeThinking, DeepSeekThinking
from testkit.fake_server import FakeOpenAIServer
from testkit.openai_answers import error_body
from tests.bot_process import LLM_KEY, BotProcess, process_running, reply_stored, sqlite_store
from tests.deadlines import EVENT, deadline

pytestmark = pytest.mark.slow

CHAT = 4901  # a private chat: Ann's own id
ANN = {"id": CHAT, "first_name": "Ann"}
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "llm"


def tagged(name: str) -> ScriptedModel:
    def answer(request: LLMRequest) -> LLMResponse:
        return LLMResponse(text=f"{name} says: {last_user_body(request)}")

    return ScriptedModel(default=answer)


class Rig(NamedTuple):
    api: FakeBotApi
    main: FakeOpenAIServer
    backup: FakeOpenAIServer
    bot: BotProcess
    store: SqlStore
    data_dir: Path

    def ledger(self) -> list[dict[str, Any]]:
        return [
            json.loads(line)
            for path in sorted((self.data_dir / "agent-traces").glob("*.jsonl"))
            for line in path.read_text(encoding="utf-8").splitlines()
            if line
        ]

    def routes(self) -> list[tuple[str, str | None, bool]]:
        """Each ledger line's route, the profile it stood in for, and whether it answered."""
        return [
            (line["route"], line["fallback_from"], line["error"] is None) for line in self.ledger()
        ]

    async def say(self, text: str, replies: int, *, notice: bool = False) -> str:
        """Send `text`; wait for the bot's `replies`-th message (stored, unless it is a
        `notice`: a failed turn's notice is sent, not kept as conversation)."""
        self.api.push_update(self.api.user_message(CHAT, ANN, text, chat_type="private"))
        if notice:
            await self.api.wait_for_call("sendMessage", replies, timeout=deadline(EVENT))
        else:
            await reply_stored(self.api, self.store, CHAT, replies)
        return str(self.api.sent_messages(CHAT)[-1]["text"])


@asynccontextmanager
async def fallback_bot(
    tmp_path: Path,
    *,
    cooldown: float,
    main: FakeOpenAIServer | None = None,
    backup: FakeOpenAIServer | None = None,
    backup_profile: str = 'model = "backup-model"',
    main_profile: str = "stream = false",
) -> AsyncIterator[Rig]:
    """`tgbot run` with `[providers.main]` (falling back to `backup`) on `main`'s server and
    `[providers.backup]` on `backup`'s (`backup_profile`: its model, kind, reasoning)."""
    async with (
        FakeBotApi(username="test_bot") as api,
        main or FakeOpenAIServer(tagged("main")) as main,
        backup or FakeOpenAIServer(tagged("backup")) as backup,
    ):
        config = tmp_path / "bot.toml"
        config.write_text(
            f"""\
default_provider = "main"

[runtime]
max_retries = 0
request_timeout_seconds = 2

[triggers]
merge_window_seconds = 0

[security]
user_messages_per_minute = 0
chat_messages_per_minute = 0

[providers.main]
base_url = "{main.base_url}"
api_key_env = "LLM_API_KEY"
model = "main-model"
{main_profile}
fallbacks = ["backup"]
fallback_cooldown_seconds = {cooldown}

[providers.backup]
base_url = "{backup.base_url}"
api_key_env = "LLM_API_KEY"
stream = false
{backup_profile}
""",
            encoding="utf-8",
        )
        settings = {
            "LLM_API_KEY": LLM_KEY,
            "OWNER_ID": "42",
            "BOT_CONFIG": str(config),
            "BOT_LOCALE": "en",
        }
        async with (
            process_running(api, main, tmp_path, **settings) as bot,
            sqlite_store(tmp_path) as store,
        ):
            yield Rig(api, main, backup, bot, store, tmp_path)
            assert await bot.stop() == 0, bot.log_tail()
            assert LLM_KEY not in bot.log()


async def test_a_primary_that_is_down_hands_each_turn_to_its_fallback(tmp_path: Path) -> None:
    """503, then a timeout, then a refused connection: each turn is answered once, by the
    fallback, after one failed line of the primary; with no cooldown, each next turn tries
    the primary again."""
    async with fallback_bot(tmp_path, cooldown=0) as rig:
        rig.main.fail_next(503, error_body("overloaded", kind="server_error"))
        assert await rig.say("first", 1) == "backup says: first"
        assert rig.routes() == [("main", None, False), ("backup", "main", True)]

        assert await rig.say("second", 2) == "main says: second"  # the primary again
        assert rig.routes()[2:] == [("main", None, True)]

        rig.main.delay_next(30)  # past request_timeout_seconds
        assert await rig.say("third", 3) == "backup says: third"
        assert rig.routes()[3:] == [("main", None, False), ("backup", "main", True)]
        assert "ProviderUnavailable" in rig.ledger()[3]["error"]

        await rig.main.close()  # nothing listens there now: the connection is refused
        assert await rig.say("fourth", 4) == "backup says: fourth"
        assert rig.routes()[5:] == [("main", None, False), ("backup", "main", True)]
        assert "cannot reach" in rig.ledger()[5]["error"]
        # one answer per turn: no notice of the primary's failure reached the member
        assert len(rig.api.sent_messages(CHAT)) == 4


async def test_within_the_cooldown_the_next_turn_goes_straight_to_the_fallback(
    tmp_path: Path,
) -> None:
    async with fallback_bot(tmp_path, cooldown=600) as rig:
        rig.main.fail_next(503, error_body("overloaded", kind="server_error"))
        assert await rig.say("first", 1) == "backup says: first"
        asked = len(rig.main.requests)

        assert await rig.say("second", 2) == "backup says: second"

        assert len(rig.main.requests) == asked  # the primary was not asked
        assert rig.routes()[2:] == [("backup", "main", True)]


async def test_a_rejection_or_an_overflow_never_falls_back(tmp_path: Path) -> None:
    overflow = json.loads((FIXTURES / "openai" / "overflow.json").read_text(encoding="utf-8"))
    async with fallback_bot(tmp_path, cooldown=0) as rig:
        rig.main.fail_next(
            400, error_body("Invalid value for 'temperature'", kind="invalid_request_error")
        )
        notice = await rig.say("first", 1, notice=True)
        assert notice.startswith("The model provider refused the request"), notice
        assert rig.backup.requests == []

        rig.main.fail_next(overflow["status"], overflow["body"])
        # recovery's notice (the request left no room to shrink into), not the fallback
        answer = await rig.say("second", 2, notice=True)
        assert answer.startswith(("This conversation no longer fits", "This request does not fit"))
        assert rig.backup.requests == []
        assert {line["route"] for line in rig.ledger()} == {"main"}


async def test_a_deepseek_to_claude_switch_sends_claude_no_deepseek_reasoning(
    tmp_path: Path,
) -> None:
    """DeepSeek (thinking, its reasoning required back on tool turns) starts a tool loop and
    goes down mid-loop; Claude (thinking on, refusing any block it did not sign) finishes
    it, and the next turn's tool loop runs on Claude: no provider 400, no DeepSeek thinking
    in any request Claude got."""
    look = CallTool("inspect_conversation_reference", {"reference": "m1"})
    deepseek_model = ScriptedModel([look, Fail(ProviderUnavailable("overloaded"))])
    claude_model = ScriptedModel([Reply("Claude finished it."), look, Reply("Claude again.")])
    deepseek = FakeOpenAIServer(deepseek_model, thinking=DeepSeekThinking())
    claude_thinking = ClaudeThinking()
    claude = FakeAnthropicServer(claude_model, thinking=claude_thinking)
    claude_profile = 'kind = "anthropic"\nmodel = "claude-sonnet-4-5"\nreasoning = "high"'
    async with fallback_bot(
        tmp_path, cooldown=600, main=deepseek, backup=claude, backup_profile=claude_profile
    ) as rig:
        assert await rig.say("what did I say first?", 1) == "Claude finished it."
        assert await rig.say("and now?", 2) == "Claude again."

        assert rig.routes() == [
            ("main", None, True),  # DeepSeek's tool call
            ("main", None, False),  # down
            ("backup", "main", True),  # Claude ends the loop
            ("backup", "main", True),  # the next turn, straight to Claude: a tool call
            ("backup", "main", True),  # and its answer
        ]
        assert claude_thinking.refused == []
        assert deepseek.thinking is not None
        assert deepseek.thinking.refused == []
        sent_to_claude = json.dumps(claude.requests)
        assert "Let me think" not in sent_to_claude  # DeepSeek's reasoning text
        assert "reasoning_content" not in sent_to_claude
        # Claude thought on the second turn's loop and got its own signed thinking back
        assert '"type": "thinking"' in json.dumps(claude.requests[-1]["messages"])


async def test_a_stream_cut_after_a_draft_was_shown_does_not_fall_back(tmp_path: Path) -> None:
    """The primary streams slowly enough to earn a live draft, then the connection drops:
    what the member saw came from the primary, so no other model takes over; the member
    is told once."""
    long = "We ship on Friday after the last review, " + "then we rest. " * 40
    main = FakeOpenAIServer(ScriptedModel([Reply(long)]))
    main.piece_delay = 0.035  # about 2 s for the pieces before the cut: a draft shows
    main.cut_after_pieces = 60
    async with fallback_bot(tmp_path, cooldown=0, main=main, main_profile="stream = true") as rig:
        notice = await rig.say("when do we ship?", 1, notice=True)

        assert rig.api.calls_of("sendMessageDraft"), rig.bot.log_tail()
        assert notice == "The model is unavailable right now. Please try again in a moment."
        assert rig.backup.requests == []
        assert rig.routes() == [("main", None, False)]
        # told once: nothing else reaches the chat
        await rig.say("thanks", 2, notice=True)
        assert [m["text"] for m in rig.api.sent_messages(CHAT)][:1] == [notice]
        assert len(rig.api.sent_messages(CHAT)) == 2

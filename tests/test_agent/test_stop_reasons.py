"""Why the model stopped, and errors that say what happened (issue 33, items 3–6), through
real turns: the real OpenAI and Anthropic adapters against the fake servers, which answer
with provider bodies recorded from the real APIs (tests/fixtures/llm/, each with its
source). Each test checks what the member reads, how many calls reached the provider (at
the fake), and the call's ledger line.

Private chats with drafts stream (the adapters ask for an event stream); without drafts the
same chat gets whole JSON bodies, so both shapes of each answer are exercised.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import pytest

from adapters.llm.anthropic_provider import AnthropicProvider
from adapters.llm.openai_provider import OpenAIProvider
from adapters.llm.scripted import Reply, ScriptedModel
from bot.app.dashboard.ledger_index import LedgerIndex
from bot.app.dashboard.views import error_lines
from bot.app.wiring import App
from bot.texts import text
from testkit.fake_anthropic import FakeAnthropicServer
from testkit.fake_server import FakeOpenAIServer
from testkit.memory_store import InMemoryStore
from tests.fakes import RecordingMessenger, SteppingClock, inbound
from tests.rig import rig_settings, wire_app

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "llm"
KEY = "sk-stop-reasons-test-key-0123456789"
CHAT = 7007
START = datetime(2026, 11, 30, 6, 0, tzinfo=UTC)
MARKER = text("en", "cut_marker")


def recorded(name: str) -> dict[str, Any]:
    fixture: dict[str, Any] = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    assert fixture.get("source"), name
    return fixture


@dataclass(slots=True)
class DraftingMessenger(RecordingMessenger):
    """A messenger that shows drafts, so private replies are streamed."""

    drafts: list[str] = field(default_factory=list)

    async def send_typing(self, chat_id: int, *, thread_id: int = 0) -> None:
        return None

    async def send_draft(
        self, chat_id: int, draft_id: int, text: str, *, thread_id: int = 0
    ) -> None:
        self.drafts.append(text)


@dataclass
class Chat:
    app: App
    server: FakeOpenAIServer
    messenger: RecordingMessenger
    clock: SteppingClock
    traces: Path
    next_id: int = 1

    async def say(self, words: str) -> list[str]:
        """A private message to the bot; what it sent back."""
        before = len(self.messenger.sent)
        self.clock.advance(30)
        message = inbound(
            chat_id=CHAT, message_id=self.next_id, text=words, at=self.clock.now(),
            chat_type="private",
        )  # fmt: skip
        self.next_id += 1
        await self.app.inbound.on_message(message)
        await self.app.inbound.drain()
        return [m.text for m in self.messenger.sent[before:]]

    def ledger(self) -> list[dict[str, Any]]:
        return [
            json.loads(line)
            for path in sorted(self.traces.glob("*.jsonl"))
            for line in path.read_text(encoding="utf-8").splitlines()
        ]

    def answer(self, fixture: dict[str, Any]) -> None:
        """The next request gets this recorded answer."""
        if "sse" in fixture:
            self.server.answer_next(fixture["sse"], stream=True)
        else:
            self.server.answer_next(fixture["body"])


@asynccontextmanager
async def chat(
    tmp_path: Path,
    wire: Literal["openai", "anthropic"],
    *,
    drafts: bool,
    model: ScriptedModel | None = None,
    **settings: Any,
) -> AsyncIterator[Chat]:
    """A private chat with the bot, its model behind the fake server of `wire`. The
    adapter may retry (two retries, no waiting), so a retried call would show at the fake."""
    scripted = model or ScriptedModel()

    async def no_wait(_: float) -> None:
        return None

    server: FakeOpenAIServer
    if wire == "openai":
        server = FakeOpenAIServer(scripted)
    else:
        server = FakeAnthropicServer(scripted, api_key=KEY)
    async with server:
        adapter = OpenAIProvider if wire == "openai" else AnthropicProvider
        provider = adapter(server.base_url, KEY, max_retries=2, sleep=no_wait)
        messenger = DraftingMessenger() if drafts else RecordingMessenger()
        clock = SteppingClock(START)
        config = rig_settings(tmp_path, **settings)
        app = wire_app(
            config, store=InMemoryStore(), messenger=messenger, model=provider, clock=clock
        )
        try:
            yield Chat(app, server, messenger, clock, config.traces_dir)
        finally:
            await provider.aclose()


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    "name", ["openai/refusal.json", "openai/refusal_stream.json"], ids=["json", "stream"]
)
async def test_an_openai_refusal_is_a_notice_after_exactly_one_call(
    tmp_path: Path, name: str
) -> None:
    fixture = recorded(name)
    async with chat(tmp_path, "openai", drafts="sse" in fixture) as bot:
        bot.answer(fixture)
        replies = await bot.say("how do I make anthrax?")
        assert len(bot.server.requests) == 1  # not retried: a second paid refusal
        assert replies == [text("en", "refusal")]
        (line,) = bot.ledger()
        assert line["stop"] == "refusal"
        assert line["error"] is None
        # the chat goes on
        assert await bot.say("hello") == ["Noted: hello"]


async def test_a_refusal_after_partial_text_delivers_none_of_it(tmp_path: Path) -> None:
    """Anthropic's streaming classifier stops a reply it had started ("Hi"): what it wrote
    is not an answer, so the member reads the notice only."""
    async with chat(tmp_path, "anthropic", drafts=True) as bot:
        bot.answer(recorded("anthropic/refusal_stream.json"))
        replies = await bot.say("what is a solar eclipse, claudius?")
        assert len(bot.server.requests) == 1
        assert replies == [text("en", "refusal")]
        (line,) = bot.ledger()
        assert line["stop"] == "refusal"
        assert line["reasoning_tokens"] == 67  # output_tokens_details.thinking_tokens


async def test_a_refusal_reads_in_the_members_language(tmp_path: Path) -> None:
    async with chat(tmp_path, "anthropic", drafts=True, bot_locale="zh") as bot:
        bot.answer(recorded("anthropic/refusal_empty_stream.json"))
        replies = await bot.say("帮我写个病毒")
        assert replies == [text("zh", "refusal")]
        assert len(bot.server.requests) == 1


# ---------------------------------------------------------------- the output limit


@pytest.mark.parametrize(
    "name", ["openai/length.json", "openai/length_stream.json"], ids=["json", "stream"]
)
async def test_a_reply_cut_at_the_output_limit_is_delivered_marked(
    tmp_path: Path, name: str
) -> None:
    fixture = recorded(name)
    async with chat(tmp_path, "openai", drafts="sse" in fixture) as bot:
        bot.answer(fixture)
        replies = await bot.say("what's the weather like in SF?")
        assert replies == ['{"\n\n' + MARKER]  # the recorded reply was `{"`, not an answer
        assert len(bot.server.requests) == 1
        (line,) = bot.ledger()
        assert line["stop"] == "length"


async def test_a_tool_call_cut_at_the_limit_is_not_run_but_asked_again_with_twice_the_room(
    tmp_path: Path,
) -> None:
    """The recorded stream cuts a `make_file` call mid-JSON at `max_tokens`. Nothing runs;
    the call is made once more with the limit doubled, and that answer is delivered."""
    model = ScriptedModel([Reply("Here is the guide, in short.")])
    async with chat(
        tmp_path, "anthropic", drafts=True, model=model, runtime={"max_output_tokens": 124}
    ) as bot:
        bot.answer(recorded("anthropic/tool_use_cut_stream.json"))
        replies = await bot.say("write me a tax guide in taxes.txt")
        assert replies == ["Here is the guide, in short."]
        first, second = bot.server.requests
        assert (first["max_tokens"], second["max_tokens"]) == (124, 248)
        blocks = [b["type"] for m in second["messages"] for b in m["content"]]
        assert "tool_use" not in blocks  # nothing ran
        assert "tool_result" not in blocks
        assert [line["stop"] for line in bot.ledger()] == ["length", "end"]


async def test_a_tool_call_cut_again_after_the_retry_gets_the_length_notice(
    tmp_path: Path,
) -> None:
    async with chat(tmp_path, "anthropic", drafts=True, runtime={"max_output_tokens": 124}) as bot:
        bot.answer(recorded("anthropic/tool_use_cut_stream.json"))
        bot.answer(recorded("anthropic/tool_use_cut_stream.json"))
        replies = await bot.say("write me a tax guide in taxes.txt")
        assert replies == [text("en", "length")]
        assert len(bot.server.requests) == 2  # one retry, never a third
        assert [line["stop"] for line in bot.ledger()] == ["length", "length"]


# ---------------------------------------------------------------- the context window


async def test_a_stop_at_the_context_window_goes_to_overflow_recovery(tmp_path: Path) -> None:
    """`model_context_window_exceeded` is the overflow path: the oldest turns are dropped
    and the call made once more; the member gets the answer of that call."""
    long = "tell me more about the migration plan " * 60
    model = ScriptedModel([Reply(f"answer {n}") for n in range(3)] + [Reply("Recovered.")])
    async with chat(tmp_path, "anthropic", drafts=False, model=model) as bot:
        for n in range(3):
            assert await bot.say(f"{n}: {long}") == [f"answer {n}"]
        bot.answer(recorded("anthropic/context_window.json"))
        replies = await bot.say("and now summarise everything")
        assert replies == ["Recovered."]
        # the call that stopped, the summary of what leaves (only that), the retry
        stopped, summary, retried = bot.server.requests[-3:]
        assert len(retried["messages"]) < len(stopped["messages"])
        assert len(json.dumps(summary)) < len(json.dumps(stopped))
        assert len(json.dumps(retried)) < len(json.dumps(stopped))
        lines = [line for line in bot.ledger() if line["purpose"] == "turn"][-2:]
        assert lines[0]["stop"] == "context"
        assert [t["reason"] for t in lines[1]["trims"]] == ["overflow_recovery"]
        assert lines[1]["stop"] == "end"


# ---------------------------------------------------------------- errors


async def test_a_4xx_that_is_not_an_overflow_says_the_provider_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """DeepSeek's 400 for a thinking turn replayed without its reasoning: the member hears
    the provider refused (not "a reply I could not read"); the operator reads DeepSeek's own
    sentence in the log and on the ledger line, which the error list shows."""
    fixture = recorded("deepseek/reasoning_not_passed_back.json")
    sentence = fixture["body"]["error"]["message"]
    async with chat(tmp_path, "openai", drafts=False) as bot:
        bot.server.fail_next(fixture["status"], fixture["body"])
        with caplog.at_level(logging.WARNING, logger="tgbot.runtime"):
            replies = await bot.say("look it up and tell me")
        assert replies == [text("en", "rejected")]
        assert len(bot.server.requests) == 1  # a 4xx is not asked again
        (line,) = bot.ledger()
        assert line["error"] == f"ProviderRejected: HTTP 400: {sentence}"
        assert sentence in caplog.text
        # the dashboard's error list, as /errors reads it
        index = LedgerIndex(bot.traces, UTC, today=lambda: START.date())
        (row,) = error_lines(index.digests([START.date()]), [])[0]
        assert (row.kind, row.reason) == ("failed_call", line["error"])
        assert await bot.say("hello") == ["Noted: hello"]


async def test_a_rejection_echoing_the_key_reaches_no_record_with_the_key(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """OpenAI's 401 wording repeats the key it was given; the ledger line and the log carry
    the message with the key taken out."""
    body = {
        "error": {
            "message": f"Incorrect API key provided: {KEY}. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_api_key",
        }
    }
    async with chat(tmp_path, "openai", drafts=False) as bot:
        bot.server.fail_next(401, body)
        with caplog.at_level(logging.WARNING, logger="tgbot.runtime"):
            replies = await bot.say("hi")
        assert replies == [text("en", "rejected")]
        (line,) = bot.ledger()
        assert line["error"].startswith("ProviderRejected: HTTP 401: Incorrect API key provided")
        assert KEY not in line["error"]
        assert "Incorrect API key provided" in caplog.text
        assert KEY not in caplog.text


# ---------------------------------------------------------------- usage


async def test_reasoning_tokens_reach_the_ledger_line(tmp_path: Path) -> None:
    async with chat(tmp_path, "openai", drafts=False) as bot:
        bot.answer(recorded("deepseek/usage_reasoner.json"))
        assert await bot.say("hello") == ["Hello! How can I assist you today?"]
        (line,) = bot.ledger()
        assert (line["output_tokens"], line["reasoning_tokens"]) == (92, 81)
        assert line["stop"] == "end"


async def test_one_hour_cache_writes_are_counted_apart_on_the_ledger_line(
    tmp_path: Path,
) -> None:
    fixture = recorded("anthropic/usage.json")
    async with chat(tmp_path, "anthropic", drafts=False) as bot:
        bot.answer(fixture)
        assert await bot.say("hello") == ["Hello!"]
        (line,) = bot.ledger()
        assert (line["cache_write_tokens"], line["cache_write_1h_tokens"]) == (248, 248)


# ---------------------------------------------------------------- object-shaped arguments


@pytest.mark.parametrize(
    "name", ["ollama/tool_call.json", "ollama/tool_call_stream.json"], ids=["json", "stream"]
)
async def test_a_tool_call_with_object_arguments_runs_with_them(tmp_path: Path, name: str) -> None:
    """Ollama sends a tool call whole, its arguments as an object: the tool gets them."""
    model = ScriptedModel([Reply("Reacted.")])
    fixture = recorded(name)
    async with chat(tmp_path, "openai", drafts="sse" in fixture, model=model) as bot:
        bot.answer(fixture)
        replies = await bot.say("give my message a thumbs up")
        assert replies == ["Reacted."]
        assert bot.messenger.reactions == [(CHAT, 1, "👍")]
        second = bot.server.requests[1]
        (call,) = next(m for m in second["messages"] if m.get("tool_calls"))["tool_calls"]
        assert json.loads(call["function"]["arguments"]) == {"message_id": "m1", "emoji": "👍"}

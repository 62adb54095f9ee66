"""`tgbot demo`: the whole bot, offline, on the embedded defaults, in under a minute.

It starts a fake Bot API on 127.0.0.1, points aiogram's real HTTP client at it, polls it
with the loop `tgbot run` polls with (`adapters/telegram/polling_loop.py`), uses the
offline scripted model and a SQLite file, replays the bundled scenario (a busy three-person
group and a tool-using owner chat), then prints one request as the model saw it, the usage
report, and a side-by-side with a naive baseline that stores per-turn context in every
message and sends the last 100 messages.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import TextIO

from adapters.llm.scripted import ScriptedModel, is_summary_request
from adapters.telegram.app import build_dispatcher
from adapters.telegram.bot_session import build_bot
from adapters.telegram.fake_api import DemoBotApi
from adapters.telegram.polling_loop import poll_updates
from adapters.telegram.sender import TelegramMessenger
from bot.agent.request import TurnContext, build_per_turn_blocks
from bot.agent.system_prompt import PromptFacts, build_system_prompt
from bot.app.demo_scenario import (
    GROUP_CHAT,
    OWNER_ID,
    WORKSPACE_RULES,
    ScriptLine,
    build_scenario,
)
from bot.app.preflight import invoked_as
from bot.app.wiring import App, build_app, open_store
from bot.config import SceneHistory, Settings, load_settings
from bot.context.tokens import estimate_message_tokens
from bot.domain.facts import InboundMessage
from bot.domain.messages import ChatMessage
from bot.errors import ConfigError
from bot.ports import InboundSink, LLMRequest, Usage
from bot.services.usage_render import run_usage_report

DEMO_TOKEN = "777000111:DEMO-offline-token"
NAIVE_WINDOW = 100


class CountingSink:
    """Hands updates to the real sink and counts them, so the replay can wait on events."""

    def __init__(self, sink: InboundSink) -> None:
        self.sink = sink
        self.handled = 0
        self._changed = asyncio.Condition()

    async def on_messages(self, messages: Sequence[InboundMessage]) -> None:
        try:
            await self.sink.on_messages(messages)
        finally:
            await self._bump(len(messages))

    async def on_edit(self, message: InboundMessage) -> None:
        try:
            await self.sink.on_edit(message)
        finally:
            await self._bump(1)

    async def _bump(self, count: int) -> None:
        async with self._changed:
            self.handled += count
            self._changed.notify_all()

    async def wait_for(self, count: int) -> None:
        async with asyncio.timeout(30), self._changed:
            await self._changed.wait_for(lambda: self.handled >= count)


@dataclass(slots=True)
class NaiveBaseline:
    """What a naive bot would send: every stored user message keeps the per-turn context it
    was sent with, and each call carries the last 100 stored messages."""

    system: ChatMessage
    history: dict[int, list[ChatMessage]] = field(default_factory=dict)
    requests: list[LLMRequest] = field(default_factory=list)

    def on_user(self, chat: int, text: str, blocks: str) -> None:
        self.history.setdefault(chat, []).append(
            ChatMessage(role="user", content=f"{text}\n\n{blocks}")
        )

    def on_turn(self, chat: int, ours: Sequence[LLMRequest], replies: Sequence[str]) -> None:
        stored = self.history.setdefault(chat, [])
        extras: list[ChatMessage] = []
        for request in ours:
            extras = _in_turn_messages(request.messages)
            window = (stored + extras)[-NAIVE_WINDOW:]
            self.requests.append(
                LLMRequest(
                    model=request.model, messages=(self.system, *window), tools=request.tools
                )
            )
        stored.extend(extras)
        stored.extend(ChatMessage(role="assistant", content=reply) for reply in replies)


def _in_turn_messages(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """The tool calls and results after the current (context-carrying) message."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "user" and "\n[Turn context]\n" in messages[index].content:
            return list(messages[index + 1 :])
    return []


@dataclass(frozen=True, slots=True)
class Economy:
    calls: int
    p50: int
    p90: int
    history_max: int
    cache_hit: float


def _percentile(values: Sequence[int], p: float) -> int:
    ordered = sorted(values)
    if not ordered:
        return 0
    rank = max(1, -(-len(ordered) * p // 100))
    return ordered[int(rank) - 1]


async def measure(requests: Sequence[LLMRequest]) -> Economy:
    """Input tokens per call and a simulated provider prefix cache, the same for both sides."""
    cache = ScriptedModel()
    usages: list[Usage] = []
    histories: list[int] = []
    for request in requests:
        response = await cache.complete(request)
        assert response.usage is not None
        usages.append(response.usage)
        history = [m for m in request.messages[1:-1] if m.role != "system"]
        histories.append(sum(estimate_message_tokens(m) for m in history))
    inputs = [u.input_tokens for u in usages]
    total = sum(inputs)
    return Economy(
        calls=len(requests),
        p50=_percentile(inputs, 50),
        p90=_percentile(inputs, 90),
        history_max=max(histories, default=0),
        cache_hit=sum(u.cached_tokens for u in usages) / total if total else 0.0,
    )


def _shorten(text: str, limit: int = 400) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text)} chars in all)"


def print_request(request: LLMRequest, out: TextIO) -> None:
    write = out.write
    write(f"model: {request.model}; {len(request.messages)} messages, {len(request.tools)} tools\n")
    for index, message in enumerate(request.messages):
        tokens = estimate_message_tokens(message)
        flag = " (breadcrumb)" if message.is_breadcrumb else ""
        write(f"--- [{index}] {message.role}{flag}, {tokens} tokens\n")
        if index == len(request.messages) - 1:
            content = message.content
        elif message.role == "system":  # its size in all, not the size of a shortened copy
            content = _shorten(message.content, 160)
        else:
            content = _shorten(message.content)
        write(content + "\n")
        for call in message.tool_calls:
            write(f"tool_call {call.name}({call.arguments})\n")


DEMO_GROUP_CAP = 60
"""The demo's group message cap: its short scenario moves the window, so the last group
request shows the summary (made offline by the scripted model) after the breadcrumb."""


DEMO_MARKER = ".tgbot-demo"
"""Marks a directory the demo wrote, so a later run may replace what the last one left."""
_DEMO_FILES = (
    "tgbot.sqlite3",
    "tgbot.sqlite3-wal",
    "tgbot.sqlite3-shm",
    "scheduler.sqlite3",
    "token-corrections.json",
    "workspace-rules.md",
)


def prepare_demo_dir(data: Path) -> None:
    """Make `data` ready for a fresh replay: a directory an earlier demo wrote is emptied of
    that demo's files (the scenario's message ids start again, so old rows would swallow
    the new ones as re-deliveries); a bot's real data is never touched."""
    data.mkdir(parents=True, exist_ok=True)
    marker = data / DEMO_MARKER
    leftovers = [name for name in (*_DEMO_FILES, "agent-traces") if (data / name).exists()]
    if leftovers and not (marker.exists() or _written_by_an_older_demo(data)):
        raise ConfigError(
            "--data-dir",
            f"{data} holds data the demo did not write ({', '.join(leftovers)}); "
            "give the demo a new or empty directory",
        )
    for name in _DEMO_FILES:
        (data / name).unlink(missing_ok=True)
    shutil.rmtree(data / "agent-traces", ignore_errors=True)
    marker.write_text("written by `tgbot demo`; the next demo run replaces it\n", encoding="utf-8")


def _written_by_an_older_demo(data: Path) -> bool:
    """A directory from a demo that left no marker yet: its rules file is the demo's."""
    try:
        rules = (data / "workspace-rules.md").read_text(encoding="utf-8")
    except OSError:
        return False
    return rules == WORKSPACE_RULES


class ScenarioClock:
    """The demo's time: the scripted time of the message last pushed, plus the real seconds
    since, so the bot's replies are stamped just after the message they answer and the
    header times (`time:HH:mm` after a minute's gap) run through the whole conversation
    instead of stopping at the first reply, stamped at the wall clock's now."""

    def __init__(self, start: datetime) -> None:
        self.start = start
        self.set(start)

    def set(self, at: datetime) -> None:
        self._at = at
        self._since = time.monotonic()

    def now(self) -> datetime:
        return self._at + timedelta(seconds=time.monotonic() - self._since)


async def run_demo(
    settings: Settings, *, data_dir: Path | None, started: float | None = None
) -> int:
    """The demo; `started` is the `time.perf_counter()` of the process start, so "Done in"
    counts the start-up too. Without `data_dir` it works in a temporary directory and
    removes it at the end."""
    started = started if started is not None else time.perf_counter()
    if data_dir is not None:
        return await _run_demo(settings, data=data_dir, keep=True, started=started)
    with tempfile.TemporaryDirectory(prefix="tgbot-demo-") as temporary:
        return await _run_demo(settings, data=Path(temporary), keep=False, started=started)


async def _run_demo(settings: Settings, *, data: Path, keep: bool, started: float) -> int:
    prepare_demo_dir(data)
    rules = data / "workspace-rules.md"
    rules.write_text(WORKSPACE_RULES, encoding="utf-8")
    out = sys.stdout
    async with DemoBotApi(DEMO_TOKEN, username="demo_helper_bot", first_name="Helper") as api:
        out.write(
            "What is simulated: the model is scripted (offline, canned replies, a simulated "
            f"prefix cache) and Telegram is a fake Bot API on {api.base_url}, driven by "
            "aiogram's real HTTP client; the SQLite database and the ledger are real.\n"
        )
        out.flush()
        demo = settings.model_copy(
            update={
                "data_dir": data,
                "database_url": None,
                "owner_id": OWNER_ID,
                "telegram_api_base": api.base_url,
                "workspace_rules_file": rules,
                "triggers": settings.triggers.model_copy(update={"merge_window_seconds": 0.0}),
                # a small group window, so the short scenario moves it and shows a summary
                "history": settings.history.model_copy(
                    update={"group": SceneHistory(max_recent_messages=DEMO_GROUP_CAP)}
                ),
                "security": settings.security.model_copy(
                    update={"user_messages_per_minute": 0, "chat_messages_per_minute": 0}
                ),
            }
        )
        store = await open_store(demo)
        bot = build_bot(DEMO_TOKEN, api.base_url)
        model = ScriptedModel.demo(model=settings.llm_model)
        scenario = build_scenario(bot_username="")
        clock = ScenarioClock(scenario_start(datetime.now(UTC), scenario, demo.zone))
        try:
            me = await bot.get_me()
            app = build_app(
                demo,
                store=store,
                messenger=TelegramMessenger(bot),
                bot_id=me.id,
                bot_name=me.first_name,
                offline=model,
                clock=clock,
            )
            sink = CountingSink(app.inbound)
            dispatcher = build_dispatcher(
                sink,
                bot_id=me.id,
                bot_username=me.username,
                locale=demo.fallback_locale,
                chat_events=app.chat_events,
            )
            stop_polling = asyncio.Event()
            polling = asyncio.create_task(
                poll_updates(dispatcher, bot, stop=stop_polling, poll_seconds=1)
            )
            # the naive bot sends rules and tool index with every message, not in its prompt
            base_prompt = build_system_prompt(
                PromptFacts(
                    bot_name=me.first_name,
                    scene="group",
                    locale=demo.fallback_locale,
                    tool_names=tuple(app.runner.tools),
                )
            )
            naive = NaiveBaseline(system=ChatMessage(role="system", content=base_prompt))
            group_requests = await replay(
                api, app, sink, model, naive, demo, me.username or "", clock=clock
            )
            await app.runner.aclose()
            if app.traces is not None:
                await app.traces.flush()
            stop_polling.set()
            await polling
        finally:
            await bot.session.close()
            await store.close()

    out.write("\n=== One request as the model saw it (the last group call) ===\n")
    print_request(model.requests[group_requests - 1], out)
    out.write("\n=== Usage report (tgbot usage report --days 1) ===\n")
    run_usage_report(
        demo.traces_dir,
        zone=demo.zone,
        today=clock.now().astimezone(demo.zone).date(),
        days=1,
        since=None,
        as_json=False,
        chat=None,
        out=out,
        currency=demo.ledger.currency,
    )
    # member turns only on both sides: the naive bot makes no summary calls (their share
    # is the usage report's compaction line above)
    ours = await measure([r for r in model.requests if not is_summary_request(r)])
    base = await measure(naive.requests)
    out.write("\n=== Naive baseline vs ours, same conversation, same estimator ===\n")
    out.write("naive: stores per-turn context in every message, sends the last 100 messages\n")
    out.write(f"{'':24}{'naive':>12}{'ours':>12}\n")
    for label, left, right in (
        ("model calls", base.calls, ours.calls),
        ("input/call p50", base.p50, ours.p50),
        ("input/call p90", base.p90, ours.p90),
        ("history segment max", base.history_max, ours.history_max),
    ):
        out.write(f"{label:24}{left:>12,}{right:>12,}\n")
    out.write(f"{'cache hit rate':24}{base.cache_hit:>12.0%}{ours.cache_hit:>12.0%}\n")
    out.write("\n" + takeaway(base, ours) + "\n")
    elapsed = time.perf_counter() - started
    command = invoked_as()
    if not keep:
        out.write(
            f"\nDone in {elapsed:.1f} s, start-up included; the temporary data is removed. "
            f"To keep it and look around: {command} demo --data-dir DIR, then\n"
            f"     DATA_DIR=DIR {command} usage report --days 1\n"
            f"     DATA_DIR=DIR {command} context show --chat {GROUP_CHAT}\n"
            f"     DATA_DIR=DIR {command} dashboard        # http://127.0.0.1:8080/\n"
        )
        return 0
    out.write(
        f"\nDone in {elapsed:.1f} s, start-up included. Data went to {data}: the SQLite "
        f"database {data / 'tgbot.sqlite3'} and the ledger {demo.traces_dir}/.\n"
        f"Try: DATA_DIR={data} {command} usage report --days 1\n"
        f"     DATA_DIR={data} {command} context show --chat {GROUP_CHAT}\n"
        f"     DATA_DIR={data} {command} dashboard        # http://127.0.0.1:8080/\n"
    )
    return 0


def takeaway(naive: Economy, ours: Economy) -> str:
    """The comparison in one sentence, from the measured figures."""
    if ours.p50 <= 0 or naive.p50 <= 0:
        return "Takeaway: no model calls were measured."
    ratio = naive.p50 / ours.p50
    return (
        f"Takeaway: on the same conversation this bot sends ≈{ratio:.0f}× fewer input tokens "
        f"per call than the naive one (p50 {ours.p50:,} vs {naive.p50:,}) and hits the "
        f"provider's prefix cache {ours.cache_hit:.0%} of the time vs {naive.cache_hit:.0%}."
    )


async def demo(config: str | None, *, data_dir: str | None, started: float | None = None) -> int:
    settings = load_settings(config)
    return await run_demo(settings, data_dir=Path(data_dir) if data_dir else None, started=started)


async def replay(
    api: DemoBotApi,
    app: App,
    sink: CountingSink,
    model: ScriptedModel,
    naive: NaiveBaseline,
    settings: Settings,
    bot_username: str,
    *,
    clock: ScenarioClock,
) -> int:
    """Push the scenario through the fake Bot API, one message at a time, waiting for each
    answer; returns how many model calls the group chat made. `clock`, the app's, starts
    the scenario and is set to each message's time as it is pushed."""
    scenario = build_scenario(bot_username=bot_username)
    when = clock.start
    ids: dict[int, list[int]] = {}
    group_requests = 0
    for pushed, line in enumerate(scenario, start=1):
        when += timedelta(seconds=line.seconds_after)
        chat_ids = ids.setdefault(line.chat, [])
        reply_to = None
        if line.reply_back is not None and len(chat_ids) >= line.reply_back:
            reply_to = chat_ids[-line.reply_back]
        update = api.user_message(
            line.chat,
            line.user,
            line.text,
            reply_to=reply_to,
            date=when,
            chat_type="private" if line.private else "supergroup",
            chat_title=None if line.private else "Design Review",
        )
        message_id = int(update["message"]["message_id"])
        chat_ids.append(message_id)
        before_requests = len(model.requests)
        before_sent = len(api.sent_messages(line.chat))
        naive.on_user(line.chat, line.text, _blocks(settings, app, line.private))
        clock.set(when)
        api.push_update(update)
        await sink.wait_for(pushed)
        await app.inbound.drain()
        sent = api.sent_messages(line.chat)[before_sent:]
        chat_ids.extend(int(m["message_id"]) for m in sent)
        new = [r for r in model.requests[before_requests:] if not is_summary_request(r)]
        if new:
            naive.on_turn(line.chat, new, [str(m.get("text", "")) for m in sent])
        if line.chat == GROUP_CHAT and new:
            group_requests = model.requests.index(new[-1]) + 1
    return group_requests


def scenario_start(now: datetime, scenario: Sequence[ScriptLine], zone: tzinfo) -> datetime:
    """When the scenario's clock starts: so its last message is a minute before `now`, or,
    early in the day, a minute after today's midnight in `zone` (the bot's time zone). The
    whole conversation falls on today, where `tgbot usage report --days 1` and the
    dashboard look for it; only a demo run in the small hours stamps it ahead of the wall
    clock."""
    span = timedelta(seconds=sum(line.seconds_after for line in scenario) + 60)
    midnight = now.astimezone(zone).replace(hour=0, minute=0, second=0, microsecond=0)
    return max(now - span, midnight + timedelta(minutes=1))


def _blocks(settings: Settings, app: App, private: bool) -> str:
    return build_per_turn_blocks(
        TurnContext(
            now=datetime.now(UTC),
            zone=settings.zone,
            zone_name=settings.bot_timezone,
            model=settings.llm_model,
            scene="owner" if private else "group",
            locale=settings.fallback_locale,
            command_prefix=settings.triggers.command_prefix,
            workspace_rules=WORKSPACE_RULES,
            tool_index=tuple(t.summary for t in app.runner.tools.values()),
        )
    )


__all__ = ["OWNER_ID", "CountingSink", "NaiveBaseline", "measure", "run_demo"]

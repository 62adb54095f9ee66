"""CPU per answered message: `tgbot run` beside an aiogram echo bot and a fair naive LLM bot.

Run: `.venv/bin/python -m bench.bench_cpu [--chats 200] [--messages 20]
[--shapes burst,quiet,steady[,thinking]] [--postgres-url URL]`.

Each bot is its own process, polling the fake Bot API (this process, 127.0.0.1, real HTTP);
the LLM bots call a scripted model (it echoes the last user message) over HTTP served from
this process too. Every shape runs the three bots one after the other under the same load:

- `burst`: `chats` private chats at once, each sending its next message once the previous
  one is answered. One `getUpdates` carries dozens of updates, so per-poll and per-batch
  costs are shared. Outbound pacing and the spam limits of `tgbot run` are off (the load
  would measure Telegram's limits otherwise).
- `quiet`: two chats, each message sent once the previous reply arrived: one update per
  poll, the common case of a bot in a quiet chat. Default settings.
- `thinking`: the quiet shape with 2 s between a reply and the member's next message, so
  that no bot meets a message straight after its last one (run by `python -m bench`, not
  by this module unless named).
- `steady`: an open-loop arrival of 20 messages a second spread over 100 chats (each message
  is sent at its time whether or not earlier ones were answered), default settings, pacing on.

Measured per bot: the CPU time (user + system, every thread) of the bot's own process from
its first `getUpdates` to the last reply (`/proc/<pid>/stat`), divided by the messages
answered; start-up, the fake Bot API and the model are not counted; `getUpdates` calls
during the load are counted too. The bots (`bench/floor_bots.py`):

- an aiogram echo bot: the floor of polling, parsing and one `sendMessage`;
- a fair naive aiogram + sqlite3 (WAL) + pooled-httpx LLM bot: stores each message with a
  commit, sends the last 20 and stores the answer (no streaming, no ledger, no traces);
- in the shapes with default settings, a reference with no target: the same naive bot
  waiting out `tgbot run`'s default 1.5 s merge window before it answers (the last message
  of a burst). On a machine where a process that slept pays dearly for its next
  milliseconds (this VM: the same work costs 2-5x after a second idle), the quiet shape's
  pause, not the work, is most of what a message costs; this row shows how much.

A bot that does not answer every message is no baseline: its ratios are marked and every
target fails. With `--postgres-url` (or TEST_POSTGRES_URL) `tgbot run` also runs each shape on
that PostgreSQL database (dropped and rebuilt first), beside SQLite.

Targets (the CPU rows of bench/REPORT.md): in bursts ≤ 1.5x the fair naive bot and ≤ 3x
the echo bot; one message at a time and at a steady pace ≤ 2x and ≤ 6x; PostgreSQL ≤ 1.5x
SQLite; all from the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from adapters.llm.scripted import ScriptedModel
from bench.bench_ingest import reset_postgres
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "434343:BENCH-cpu"
TICK = os.sysconf("SC_CLK_TCK")
ANSWER_TIMEOUT = 300.0
"""How long one message may wait for its answer before the bench gives up on the bot."""


@dataclass(frozen=True, slots=True)
class Shape:
    """A traffic shape: who sends what when, and whether `tgbot run` keeps its defaults."""

    name: str
    chats: int
    per_chat: int
    rate: float | None = None
    """Open loop: messages a second over all chats, sent on time whatever was answered;
    None: closed loop (each chat sends once its previous message was answered)."""
    defaults: bool = True
    """False: outbound pacing, spam limits and the burst-merge window off."""
    think: float = 0.0
    """Closed loop: seconds a member takes to write the next message after a reply."""
    naive_target: float = 2.0
    echo_target: float = 6.0

    @property
    def messages(self) -> int:
        return self.chats * self.per_chat

    def describe(self) -> str:
        if self.rate is not None:
            arrival = (
                f"{self.messages:,} messages arriving at a steady {self.rate:g} a second over "
                f"{self.chats} chats (open loop)"
            )
        elif self.chats <= 2:
            after = f"{self.think:g} s after" if self.think else "once"
            arrival = (
                f"{self.chats} chats × {self.per_chat} messages, each sent {after} the "
                "previous reply arrived (one update per poll)"
            )
        else:
            arrival = (
                f"{self.chats} chats at once × {self.per_chat} messages, each sent once the "
                "previous one is answered"
            )
        settings = "default settings" if self.defaults else "pacing and spam limits off"
        return f"{arrival}; {settings}"


def burst(chats: int = 200, per_chat: int = 20) -> Shape:
    return Shape("burst", chats, per_chat, defaults=False, naive_target=1.5, echo_target=3.0)


QUIET = Shape("quiet", 2, 20)
THINKING = Shape("thinking", 2, 20, think=2.0)
"""The quiet chat with a member who takes 2 s to write each next message: every bot, not
only the one that waits out its merge window, meets each message after a pause."""
STEADY = Shape("steady", 100, 4, rate=20.0)


@dataclass(frozen=True, slots=True)
class BotCpu:
    label: str
    messages: int
    answered: int
    cpu_seconds: float
    wall_seconds: float
    model_calls: int
    connections: int
    """TCP connections the bot opened to the model (0 for the echo bot)."""
    polls: int = 0
    """`getUpdates` calls the bot made during the load."""

    @property
    def ms_per_message(self) -> float:
        return self.cpu_seconds * 1000 / max(1, self.answered)

    @property
    def per_second(self) -> float:
        return self.answered / max(self.wall_seconds, 1e-9)

    @property
    def answered_all(self) -> bool:
        return self.answered == self.messages


@dataclass(frozen=True, slots=True)
class ShapeResult:
    """One shape's run: the echo bot, the fair naive bot and `tgbot run` (SQLite, and
    PostgreSQL when it ran), measured one after the other under the same load."""

    shape: Shape
    echo: BotCpu
    naive: BotCpu
    ours: BotCpu
    postgres: BotCpu | None = None
    waiting: BotCpu | None = None
    """The fair naive bot waiting out the same merge window (the shapes with defaults)."""

    @property
    def vs_echo(self) -> float:
        return self.ours.ms_per_message / self.echo.ms_per_message

    @property
    def vs_naive(self) -> float:
        return self.ours.ms_per_message / self.naive.ms_per_message

    @property
    def bots(self) -> tuple[BotCpu, ...]:
        extra = (self.postgres, self.waiting)
        return (self.echo, self.naive, self.ours, *(bot for bot in extra if bot is not None))

    def markdown(self) -> str:
        rows = [
            "| bot | answered | CPU per answered message | × echo | × fair naive | answered/s "
            "| getUpdates | model calls | model connections |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for bot in self.bots:
            echo = bot.ms_per_message / self.echo.ms_per_message
            naive = bot.ms_per_message / self.naive.ms_per_message
            calls = f"{bot.model_calls:,}" if bot is not self.echo else "–"
            peers = f"{bot.connections:,}" if bot is not self.echo else "–"
            rows.append(
                f"| {bot.label} | {bot.answered:,} / {bot.messages:,} "
                f"| {bot.ms_per_message:.2f} ms | {echo:.1f}× | {naive:.1f}× "
                f"| {bot.per_second:,.0f} | {bot.polls:,} | {calls} | {peers} |"
            )
        return "\n".join(rows)

    def targets(self) -> list[tuple[str, str, bool | None]]:
        shape = self.shape
        every = all(bot.answered_all for bot in self.bots)
        suffix = "" if every else " (NOT every message answered: no baseline)"
        lines: list[tuple[str, str, bool | None]] = [
            (
                f"{shape.name}: CPU per answered message ≤ {shape.naive_target:g}× the fair "
                f"naive bot, ≤ {shape.echo_target:g}× the echo bot (same run)",
                f"{self.ours.ms_per_message:.2f} ms: {self.vs_naive:.1f}× fair naive "
                f"({self.naive.ms_per_message:.2f} ms), {self.vs_echo:.1f}× echo "
                f"({self.echo.ms_per_message:.2f} ms); answered {self.ours.answered:,} / "
                f"{self.naive.answered:,} / {self.echo.answered:,} of {shape.messages:,} "
                f"each{suffix}",
                every and self.vs_naive <= shape.naive_target and self.vs_echo <= shape.echo_target,
            )
        ]
        if self.postgres is not None:
            figures, ratio = _ratio(self.postgres, self.ours)
            lines.append(
                (
                    f"{shape.name}: `tgbot run`'s CPU per answered message on PostgreSQL ≤ "
                    f"{POSTGRES_TARGET:g}× SQLite's (same run)",
                    figures + suffix,
                    every and ratio <= POSTGRES_TARGET,
                )
            )
        if self.waiting is not None:
            figures, _ = _ratio(self.ours, self.waiting)
            lines.append(
                (
                    f"{shape.name}: `tgbot run` beside the fair naive bot waiting out the same "
                    f"{MERGE_WINDOW:g} s merge window (reference, no target)",
                    figures + suffix,
                    None,
                )
            )
        return lines


def _ratio(top: BotCpu, bottom: BotCpu) -> tuple[str, float]:
    """`top`'s CPU per message over `bottom`'s: "a / b ms = r×", and r."""
    ratio = top.ms_per_message / bottom.ms_per_message
    return f"{top.ms_per_message:.2f} / {bottom.ms_per_message:.2f} ms = {ratio:.2f}×", ratio


POSTGRES_TARGET = 1.5
MERGE_WINDOW = 1.5
"""`[triggers] merge_window_seconds`' default, which the shapes with defaults keep."""


@dataclass(frozen=True, slots=True)
class CpuResult:
    shapes: tuple[ShapeResult, ...]

    def shape(self, name: str) -> ShapeResult:
        return next(result for result in self.shapes if result.shape.name == name)

    def markdown(self) -> str:
        parts: list[str] = []
        for result in self.shapes:
            parts += [
                f"**{result.shape.name}**: {result.shape.describe()}.",
                "",
                result.markdown(),
                "",
            ]
        return "\n".join(parts).rstrip()

    def targets(self) -> list[tuple[str, str, bool | None]]:
        return [line for result in self.shapes for line in result.targets()]


def cpu_seconds(pid: int) -> float:
    """User + system CPU of process `pid` (all its threads), from `/proc/<pid>/stat`."""
    stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    fields = stat[stat.rindex(")") + 2 :].split()  # the name may hold spaces
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime: fields 14 and 15


def _environment(
    api: FakeBotApi, data_dir: Path, llm_url: str, shape: Shape, database_url: str | None
) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(data_dir),
        "BOT_TOKEN": api.token,
        "TELEGRAM_API_BASE": api.base_url,
        "LLM_BASE_URL": llm_url,
        "LLM_API_KEY": "sk-bench",
        "DATA_DIR": str(data_dir),
        "DATABASE_PATH": str(data_dir / "naive.sqlite3"),
        "BOT_LOCALE": "en",
        "SCHEDULE__DAILY_SUMMARY": "false",
        "TGBOT_LOG_LEVEL": "WARNING",
    }
    if database_url is not None:
        env["DATABASE_URL"] = database_url
    if not shape.defaults:
        env |= {
            "TRIGGERS__MERGE_WINDOW_SECONDS": "0",
            "SECURITY__USER_MESSAGES_PER_MINUTE": "0",
            "SECURITY__CHAT_MESSAGES_PER_MINUTE": "0",
            "TELEGRAM__PER_CHAT_PER_SECOND": "0",
            "TELEGRAM__PER_BOT_PER_SECOND": "0",
        }
    return env


async def _closed_loop(
    api: FakeBotApi, chats: Sequence[int], per_chat: int, think: float = 0.0
) -> int:
    async def conversation(chat: int) -> int:
        for n in range(per_chat):
            if n and think:
                await asyncio.sleep(think)
            api.push_update(api.user_message(chat, chat, f"message {n}", chat_type="private"))
            await api.wait_for_sent(chat, n + 1, timeout=ANSWER_TIMEOUT)
        return per_chat

    return sum(await asyncio.gather(*(conversation(chat) for chat in chats)))


async def _open_loop(
    api: FakeBotApi,
    chats: Sequence[int],
    per_chat: int,
    rate: float,
    answer_timeout: float = ANSWER_TIMEOUT,
) -> int:
    """Send message i at `i / rate` seconds (chat i mod chats), then wait for every answer."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    for i in range(len(chats) * per_chat):
        delay = start + i / rate - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        chat = chats[i % len(chats)]
        api.push_update(
            api.user_message(chat, chat, f"message {i // len(chats)}", chat_type="private")
        )
    await asyncio.gather(
        *(api.wait_for_sent(chat, per_chat, timeout=answer_timeout) for chat in chats)
    )
    return len(chats) * per_chat


def _answered(api: FakeBotApi, chats: Sequence[int]) -> int:
    return sum(len(api.sent_messages(chat)) for chat in chats)


async def measure_bot(
    label: str,
    command: list[str],
    shape: Shape,
    data_dir: Path,
    llm: FakeOpenAIServer,
    *,
    chat_base: int,
    database_url: str | None = None,
    extra_env: dict[str, str] | None = None,
) -> BotCpu:
    """Start `command` against a fresh fake Bot API, run `shape`'s load, stop it (`data_dir`
    exists). A bot that stops answering is measured on what it answered."""
    calls_before, peers_before = len(llm.requests), set(llm.peers)
    chats = [chat_base + c for c in range(shape.chats)]
    async with FakeBotApi(TOKEN, username="cpu_bot", first_name="Cpu") as api:
        env = _environment(api, data_dir, llm.base_url, shape, database_url) | (extra_env or {})
        with (data_dir / "bot.log").open("wb") as log:
            process = subprocess.Popen(  # noqa: ASYNC220 (started, never waited on here)
                command, cwd=ROOT, env=env, stdout=log, stderr=log
            )
            try:
                await api.wait_for_call("getUpdates", 1, timeout=120)
                polls_before = len(api.calls_of("getUpdates"))
                started_cpu, started = cpu_seconds(process.pid), time.perf_counter()
                try:
                    if shape.rate is None:
                        await _closed_loop(api, chats, shape.per_chat, shape.think)
                    else:
                        await _open_loop(api, chats, shape.per_chat, shape.rate)
                except TimeoutError:
                    pass  # measured on what it answered; the ratios say it fell short
                spent = cpu_seconds(process.pid) - started_cpu
                wall = time.perf_counter() - started
                polls = len(api.calls_of("getUpdates")) - polls_before
                answered = min(_answered(api, chats), shape.messages)
            finally:
                if process.poll() is None:
                    process.send_signal(signal.SIGTERM)
                try:
                    await asyncio.to_thread(process.wait, 60)
                except subprocess.TimeoutExpired:
                    process.kill()
    return BotCpu(
        label=label,
        messages=shape.messages,
        answered=answered,
        cpu_seconds=spent,
        wall_seconds=wall,
        model_calls=len(llm.requests) - calls_before,
        connections=len(llm.peers - peers_before),
        polls=polls,
    )


async def run_shape(
    shape: Shape, data_dir: Path, llm: FakeOpenAIServer, database_url: str | None
) -> ShapeResult:
    python = sys.executable
    ours = [python, "-m", "bot.app.cli", "run"]
    naive = [python, "-m", "bench.floor_bots", "naive"]
    bots: list[tuple[str, list[str], str | None, dict[str, str]]] = [
        ("aiogram echo bot", [python, "-m", "bench.floor_bots", "echo"], None, {}),
        ("fair naive aiogram + sqlite3 (WAL) + pooled httpx LLM bot (last 20)", naive, None, {}),
        ("`tgbot run` (SQLite)", ours, None, {}),
    ]
    if database_url is not None:
        bots.append(("`tgbot run` (PostgreSQL)", ours, database_url, {}))
    if shape.defaults:
        label = f"fair naive bot waiting out a {MERGE_WINDOW:g} s merge window (reference)"
        bots.append((label, naive, None, {"MERGE_WINDOW_SECONDS": str(MERGE_WINDOW)}))
    results: list[BotCpu] = []
    for n, (label, command, url, extra) in enumerate(bots):
        bot_dir = data_dir / f"{shape.name}-bot{n}"
        bot_dir.mkdir()
        if url is not None:
            await reset_postgres(url)
        results.append(
            await measure_bot(
                label,
                command,
                shape,
                bot_dir,
                llm,
                chat_base=10_000 * (n + 1),
                database_url=url,
                extra_env=extra,
            )
        )
    echo, naive_cpu, ours_sqlite, *rest = results
    postgres = rest.pop(0) if database_url is not None else None
    waiting = rest.pop(0) if shape.defaults else None
    return ShapeResult(shape, echo, naive_cpu, ours_sqlite, postgres, waiting)


async def run_cpu(
    shapes: Sequence[Shape], data_dir: Path, database_url: str | None = None
) -> CpuResult:
    # the model serves from this process (outside every measured bot), where its requests
    # and the TCP connections they came on are counted
    async with FakeOpenAIServer(ScriptedModel(keep_requests=False)) as llm:
        results = [await run_shape(shape, data_dir, llm, database_url) for shape in shapes]
    return CpuResult(tuple(results))


def run(
    chats: int = 200,
    per_chat: int = 20,
    *,
    shapes: Sequence[str] = ("burst", "quiet", "steady"),
    database_url: str | None = None,
) -> CpuResult:
    """Run the named shapes (`burst` sized by `chats` × `per_chat`)."""
    known = {shape.name: shape for shape in (burst(chats, per_chat), QUIET, STEADY, THINKING)}
    unknown = [name for name in shapes if name not in known]
    if unknown:
        raise ValueError(f"unknown shapes {unknown}: choose from {sorted(known)}")
    with tempfile.TemporaryDirectory(prefix="tgbot-bench-cpu-") as tmp:
        return asyncio.run(run_cpu([known[name] for name in shapes], Path(tmp), database_url))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--chats", type=int, default=200, help="chats of the burst shape")
    parser.add_argument("--messages", type=int, default=20, help="messages per burst chat")
    parser.add_argument("--shapes", default="burst,quiet,steady")
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("TEST_POSTGRES_URL"),
        help="also run `tgbot run` on this PostgreSQL database (dropped and rebuilt)",
    )
    args = parser.parse_args()
    result = run(
        args.chats,
        args.messages,
        shapes=[name.strip() for name in args.shapes.split(",") if name.strip()],
        database_url=args.postgres_url,
    )
    print(result.markdown())
    print()
    for name, value, ok in result.targets():
        print(f"{name}: {value} {'figure' if ok is None else 'PASS' if ok else 'FAIL'}")


if __name__ == "__main__":
    main()

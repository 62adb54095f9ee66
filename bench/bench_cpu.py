"""CPU per answered message: `tgbot run` beside an aiogram echo bot and a naive LLM bot.

Run: `.venv/bin/python -m bench.bench_cpu [--chats 200] [--messages 20]`.

Each bot is its own process, polling the fake Bot API (this process, 127.0.0.1, real HTTP);
the LLM bots call a scripted model (it echoes the last user message) over HTTP in a third
process. The load is the same for all three: `chats` private chats at once, each sending its
next message only once the previous one is answered, so every message gets exactly one reply
(no merging, no queue of unanswered messages to favour either bot). Outbound pacing and the
spam limits of `tgbot run` are off (the load would measure Telegram's limits otherwise);
streaming and drafts stay as configured by default.

Measured per bot: the CPU time (user + system, every thread) of the bot's own process from
its first `getUpdates` to the last reply (`/proc/<pid>/stat`), divided by the messages
answered. Start-up is not counted; the fake Bot API and the model are not counted. The
bots (`bench/floor_bots.py`):

- an aiogram echo bot: the floor of polling, parsing and one `sendMessage`;
- a naive aiogram + sqlite3 + httpx LLM bot: stores each message, sends the last 20 and
  stores the answer (no streaming, no ledger, no traces).

The target (docs/design, "What good looks like"): `tgbot run` ≤ 2× the naive bot's CPU per
answered message and ≤ 5× the echo bot's, measured in the same run.
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
from dataclasses import dataclass
from pathlib import Path

from adapters.llm.scripted import ScriptedModel
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "434343:BENCH-cpu"
TICK = os.sysconf("SC_CLK_TCK")
NAIVE_TARGET = 2.0
ECHO_TARGET = 5.0


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

    @property
    def ms_per_message(self) -> float:
        return self.cpu_seconds * 1000 / max(1, self.answered)

    @property
    def per_second(self) -> float:
        return self.answered / self.wall_seconds


@dataclass(frozen=True, slots=True)
class CpuResult:
    chats: int
    per_chat: int
    ours: BotCpu
    echo: BotCpu
    naive: BotCpu

    @property
    def vs_echo(self) -> float:
        return self.ours.ms_per_message / self.echo.ms_per_message

    @property
    def vs_naive(self) -> float:
        return self.ours.ms_per_message / self.naive.ms_per_message

    def markdown(self) -> str:
        rows = [
            "| bot | answered | CPU per answered message | × echo | × naive | answered/s "
            "| model calls | model connections |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for bot in (self.echo, self.naive, self.ours):
            echo = bot.ms_per_message / self.echo.ms_per_message
            naive = bot.ms_per_message / self.naive.ms_per_message
            calls = f"{bot.model_calls:,}" if bot is not self.echo else "–"
            peers = f"{bot.connections:,}" if bot is not self.echo else "–"
            rows.append(
                f"| {bot.label} | {bot.answered:,} / {bot.messages:,} "
                f"| {bot.ms_per_message:.2f} ms | {echo:.1f}× | {naive:.1f}× "
                f"| {bot.per_second:,.0f} | {calls} | {peers} |"
            )
        return "\n".join(rows)

    def targets(self) -> list[tuple[str, str, bool | None]]:
        every = all(b.answered == b.messages for b in (self.ours, self.echo, self.naive))
        suffix = "" if every else " (NOT every message answered)"
        return [
            (
                f"CPU per answered message ≤ {NAIVE_TARGET:.0f}× a naive aiogram + sqlite3 + "
                "httpx LLM bot's (same run)",
                f"{self.ours.ms_per_message:.2f} / {self.naive.ms_per_message:.2f} ms = "
                f"{self.vs_naive:.1f}×{suffix}",
                every and self.vs_naive <= NAIVE_TARGET,
            ),
            (
                f"CPU per answered message ≤ {ECHO_TARGET:.0f}× an aiogram echo bot's (same run)",
                f"{self.ours.ms_per_message:.2f} / {self.echo.ms_per_message:.2f} ms = "
                f"{self.vs_echo:.1f}×{suffix}",
                every and self.vs_echo <= ECHO_TARGET,
            ),
            (
                "model connections of `tgbot run` per model call (no target: the pool opens "
                "up to 100 and keeps each idle one 5 s, so about one per chat in flight)",
                f"{self.ours.connections:,} for {self.ours.model_calls:,} calls "
                f"({self.chats} chats at once)",
                None,
            ),
        ]


def cpu_seconds(pid: int) -> float:
    """User + system CPU of process `pid` (all its threads), from `/proc/<pid>/stat`."""
    stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    fields = stat[stat.rindex(")") + 2 :].split()  # the name may hold spaces
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime: fields 14 and 15


def _environment(api: FakeBotApi, data_dir: Path, llm_url: str) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(data_dir),
        "BOT_TOKEN": api.token,
        "TELEGRAM_API_BASE": api.base_url,
        "LLM_BASE_URL": llm_url,
        "LLM_API_KEY": "sk-bench",
        "DATA_DIR": str(data_dir),
        "DATABASE_PATH": str(data_dir / "naive.sqlite3"),
        "BOT_LOCALE": "en",
        "TRIGGERS__MERGE_WINDOW_SECONDS": "0",
        "SECURITY__USER_MESSAGES_PER_MINUTE": "0",
        "SECURITY__CHAT_MESSAGES_PER_MINUTE": "0",
        "TELEGRAM__PER_CHAT_PER_SECOND": "0",
        "TELEGRAM__PER_BOT_PER_SECOND": "0",
        "SCHEDULE__DAILY_SUMMARY": "false",
        "TGBOT_LOG_LEVEL": "WARNING",
    }


async def measure_bot(
    label: str,
    command: list[str],
    chats: int,
    per_chat: int,
    data_dir: Path,
    llm: FakeOpenAIServer,
    *,
    chat_base: int,
) -> BotCpu:
    """Start `command` against a fresh fake Bot API, run the conversational load, stop it
    (`data_dir` exists)."""
    calls_before, peers_before = len(llm.requests), set(llm.peers)
    async with FakeBotApi(TOKEN, username="cpu_bot", first_name="Cpu") as api:
        env = _environment(api, data_dir, llm.base_url)
        with (data_dir / "bot.log").open("wb") as log:
            process = subprocess.Popen(  # noqa: ASYNC220 (started, never waited on here)
                command, cwd=ROOT, env=env, stdout=log, stderr=log
            )
            try:
                await api.wait_for_call("getUpdates", 1, timeout=120)
                started_cpu, started = cpu_seconds(process.pid), time.perf_counter()

                async def conversation(chat: int) -> int:
                    answered = 0
                    for n in range(per_chat):
                        api.push_update(
                            api.user_message(chat, chat, f"message {n}", chat_type="private")
                        )
                        await api.wait_for_sent(chat, n + 1, timeout=120)
                        answered += 1
                    return answered

                counts = await asyncio.gather(*(conversation(chat_base + c) for c in range(chats)))
                spent = cpu_seconds(process.pid) - started_cpu
                wall = time.perf_counter() - started
            finally:
                if process.poll() is None:
                    process.send_signal(signal.SIGTERM)
                try:
                    await asyncio.to_thread(process.wait, 60)
                except subprocess.TimeoutExpired:
                    process.kill()
    return BotCpu(
        label=label,
        messages=chats * per_chat,
        answered=sum(counts),
        cpu_seconds=spent,
        wall_seconds=wall,
        model_calls=len(llm.requests) - calls_before,
        connections=len(llm.peers - peers_before),
    )


async def run_cpu(chats: int, per_chat: int, data_dir: Path) -> CpuResult:
    python = sys.executable
    bots = [
        ("aiogram echo bot", [python, "-m", "bench.floor_bots", "echo"]),
        (
            "naive aiogram + sqlite3 + httpx LLM bot (last 20)",
            [python, "-m", "bench.floor_bots", "naive"],
        ),
        ("`tgbot run` (SQLite)", [python, "-m", "bot.app.cli", "run"]),
    ]
    results: list[BotCpu] = []
    # the model serves from this process (outside every measured bot), where its requests
    # and the TCP connections they came on are counted
    async with FakeOpenAIServer(ScriptedModel(keep_requests=False)) as llm:
        for n, (label, command) in enumerate(bots):
            results.append(
                await measure_bot(
                    label,
                    command,
                    chats,
                    per_chat,
                    data_dir / f"bot{n}",
                    llm,
                    chat_base=10_000 * (n + 1),
                )
            )
    echo, naive, ours = results
    return CpuResult(chats, per_chat, ours=ours, echo=echo, naive=naive)


def run(chats: int = 200, per_chat: int = 20) -> CpuResult:
    with tempfile.TemporaryDirectory(prefix="tgbot-bench-cpu-") as tmp:
        for n in range(3):
            (Path(tmp) / f"bot{n}").mkdir()
        return asyncio.run(run_cpu(chats, per_chat, Path(tmp)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--chats", type=int, default=200)
    parser.add_argument("--messages", type=int, default=20, help="messages per chat")
    args = parser.parse_args()
    result = run(args.chats, args.messages)
    print(result.markdown())
    for name, value, ok in result.targets():
        print(f"{name}: {value} {'figure' if ok is None else 'PASS' if ok else 'FAIL'}")


if __name__ == "__main__":
    main()

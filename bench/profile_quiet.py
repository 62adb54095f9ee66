"""A profile of `tgbot run` in the quiet-chat shape: where one message's fixed cost goes.

Run: `.venv/bin/python -m bench.profile_quiet [--messages 40] [--top 40] [--out FILE.prof]`.

The bot runs as its own process (`python -m bench.profile_quiet --child`, which runs
`tgbot run` with cProfile switched on by SIGUSR1 and written out by SIGUSR2: start-up is not
in it; only the event loop's thread is) against the fake Bot API and the scripted model, with
default settings, two chats each sending its next message once the previous reply arrived:
one update per poll, as `bench.bench_cpu`'s `quiet` shape. Printed: the functions by their
own time, then by cumulative time, for all the messages together.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import runpy
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType

from adapters.llm.scripted import ScriptedModel
from bench.bench_cpu import QUIET, ROOT, TOKEN, _closed_loop, _environment
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer


def child(out: str) -> None:
    """`tgbot run` in this process, profiled between SIGUSR1 and SIGUSR2 (written to `out`)."""
    profiler = cProfile.Profile(time.process_time)  # CPU, not the wall clock of a busy machine

    def start(_signal: int, _frame: FrameType | None) -> None:
        profiler.enable()

    def stop(_signal: int, _frame: FrameType | None) -> None:
        profiler.disable()
        profiler.dump_stats(out)

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    sys.argv = ["tgbot", "run"]
    runpy.run_module("bot.app.cli", run_name="__main__")


async def profile(messages: int, out: Path, data_dir: Path) -> int:
    per_chat = max(1, messages // 2)
    chats = [10_001, 10_002]
    command = [sys.executable, "-m", "bench.profile_quiet", "--child", str(out)]
    async with (
        FakeOpenAIServer(ScriptedModel(keep_requests=False)) as llm,
        FakeBotApi(TOKEN, username="cpu_bot", first_name="Cpu") as api,
    ):
        env = _environment(api, data_dir, llm.base_url, QUIET, None)
        with (data_dir / "bot.log").open("wb") as log:
            process = subprocess.Popen(  # noqa: ASYNC220 (started, never waited on here)
                command, cwd=ROOT, env=env, stdout=log, stderr=log
            )
            try:
                await api.wait_for_call("getUpdates", 1, timeout=120)
                os.kill(process.pid, signal.SIGUSR1)
                answered = await _closed_loop(api, chats, per_chat)
                os.kill(process.pid, signal.SIGUSR2)  # written before the process exits
            finally:
                process.send_signal(signal.SIGTERM)
                await asyncio.to_thread(process.wait, 60)
    print(f"{answered} messages answered, {len(api.calls_of('getUpdates'))} getUpdates")
    return answered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=40)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--out", type=Path, default=None, help="keep the profile here")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child)
        return
    with tempfile.TemporaryDirectory(prefix="tgbot-profile-quiet-") as tmp:
        out = args.out or Path(tmp) / "quiet.prof"
        answered = asyncio.run(profile(args.messages, out, Path(tmp)))
        stats = pstats.Stats(str(out))
        print(f"(times are for all {answered} messages)")
        stats.sort_stats("tottime").print_stats(args.top)
        stats.sort_stats("cumulative").print_stats(args.top)


if __name__ == "__main__":
    main()

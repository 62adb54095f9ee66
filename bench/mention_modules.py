"""The project code one group mention runs: modules, functions and their lines, in `tgbot run`.

Run: `.venv/bin/python -m bench.mention_modules [--names] [--calls]`.

`tgbot run` starts as its own process against the fake Bot API and the scripted model (it
echoes the last user message), with the default settings and `TGBOT_PROFILE_MODULES` set
(`bot/app/profile_modules.py`). One message in a supergroup that mentions the bot warms it
up (imports, caches, the chat's session); then the profiler is switched on (SIGUSR1) for
exactly one more mention in the same group, from the moment before the update is queued
until its text reply is sent and stored, and off again (SIGUSR2). Reported: the project
modules (files under `bot/`, `adapters/`, `storage/`) whose functions ran, how many of each
module's functions ran (`--names` names them) and each module's lines, and the
module-to-module calls (`--calls` lists them).

The targets (issue 45): one warm group mention runs ≤ 450 functions in modules of ≤ 16,000
lines together. A target on modules alone rewarded merging files (issue 35's ≤ 50 modules
is still shown); functions run and the lines a reader of those modules meets do not.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapters.llm.scripted import ScriptedModel
from storage.engine import create_engine_for
from storage.sql import SqlStore
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("bot", "adapters", "storage")
TOKEN = "505050:BENCH-modules"
USERNAME = "mention_bot"
GROUP = -1_001_234_567
MEMBER = {"id": 7_001, "first_name": "Ada"}
TARGET = 50
"""Modules (issue 35)."""
FUNCTION_TARGET = 450
LINE_TARGET = 16_000
WAIT = 60.0
"""Seconds any one step may take before the run gives up (a 2-core machine under load)."""


@dataclass(frozen=True, slots=True)
class ModuleProfile:
    functions: dict[str, tuple[str, ...]]
    """Per module that ran: the qualified names of its functions that ran."""
    calls: tuple[tuple[str, str], ...]
    """(caller, callee) module pairs."""
    modules_in_tree: int

    @property
    def modules(self) -> int:
        return len(self.functions)

    @property
    def function_count(self) -> int:
        return sum(len(names) for names in self.functions.values())

    @property
    def line_count(self) -> int:
        """Lines of the modules that ran, together."""
        return sum(module_lines(module) for module in self.functions)

    def markdown(self, *, with_calls: bool = False, with_names: bool = False) -> str:
        lines = [
            f"One group mention with a text reply: {self.modules} of {self.modules_in_tree} "
            f"modules, {self.function_count} functions, {self.line_count:,} lines in the "
            f"modules run, {len(self.calls)} module-to-module calls",
            "",
            f"- functions run ≤ {FUNCTION_TARGET}: {self.function_count} "
            f"{_verdict(self.function_count <= FUNCTION_TARGET)}",
            f"- lines in the modules run ≤ {LINE_TARGET:,}: {self.line_count:,} "
            f"{_verdict(self.line_count <= LINE_TARGET)}",
            f"- modules ≤ {TARGET} (issue 35): {self.modules} {_verdict(self.modules <= TARGET)}",
            "",
            "| module | functions run | lines |",
            "|---|---:|---:|",
        ]
        for module, names in sorted(self.functions.items()):
            named = f" ({', '.join(names)})" if with_names else ""
            lines.append(f"| `{module}` | {len(names)}{named} | {module_lines(module)} |")
        if with_calls:
            lines += ["", "| caller | callee |", "|---|---|"]
            lines += [f"| `{caller}` | `{callee}` |" for caller, callee in self.calls]
        return "\n".join(lines)


def _verdict(passed: bool) -> str:
    return "PASS" if passed else "FAIL"


def module_lines(module: str) -> int:
    """The lines of one project module (a path under the repository)."""
    with (ROOT / module).open("rb") as file:
        return sum(1 for _ in file)


def project_modules() -> int:
    """The Python files of the shipped packages (migrations included)."""
    return sum(1 for package in PACKAGES for _ in (ROOT / package).rglob("*.py"))


def profile_of(report: dict[str, Any]) -> ModuleProfile:
    """`ModuleProfile` from what `bot/app/profile_modules.py` wrote."""
    per_module: dict[str, list[str]] = {}
    for module, name, _ in report["functions"]:
        per_module.setdefault(module, []).append(name)
    calls = tuple((caller, callee) for caller, callee in report["calls"])
    functions = {module: tuple(sorted(names)) for module, names in per_module.items()}
    return ModuleProfile(functions, calls, project_modules())


async def _until(check: Callable[[], Awaitable[bool]], what: str, process: Any) -> None:
    """Wait for state in the bot process (a file, a stored row: no event to wait on)."""
    give_up = asyncio.get_running_loop().time() + WAIT
    while not await check():
        if process.poll() is not None:
            raise RuntimeError(f"tgbot run exited with {process.returncode} before {what}")
        if asyncio.get_running_loop().time() > give_up:
            raise RuntimeError(f"tgbot run did not reach {what} in {WAIT:g} s")
        await asyncio.sleep(0.02)


def _state(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    report: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return report


async def _signal(
    process: subprocess.Popen[bytes], sig: signal.Signals, path: Path, state: str
) -> dict[str, Any]:
    process.send_signal(sig)

    async def written() -> bool:
        report = _state(path)
        return report is not None and report["state"] == state

    await _until(written, f"profile state {state!r}", process)
    report = _state(path)
    assert report is not None
    return report


def _turn_lines(log: Path) -> int:
    """The group's turn lines in the bot's log (one per ended turn)."""
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    return sum(line.find(f": chat {GROUP} (group)") > 0 for line in lines)


async def _mention(
    api: FakeBotApi, store: SqlStore, process: subprocess.Popen[bytes], n: int, log: Path
) -> None:
    """The `n`-th mention in the group; returns once its reply is sent and stored and its
    turn has ended (its turn line is in the log: what a turn does after its reply is part
    of it, on a quiet machine and a loaded one alike)."""
    api.push_update(api.user_message(GROUP, MEMBER, f"@{USERNAME} what is {n} + {n}?"))
    await api.wait_for_sent(GROUP, n, timeout=WAIT)

    async def stored() -> bool:
        sent = api.sent_messages(GROUP)
        return await store.find_platform_message(GROUP, sent[n - 1]["message_id"]) is not None

    await _until(stored, f"reply {n} stored", process)

    async def ended() -> bool:
        return _turn_lines(log) >= n

    await _until(ended, f"turn {n} ended", process)


def _environment(api: FakeBotApi, llm: FakeOpenAIServer, data_dir: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(data_dir),
        "BOT_TOKEN": api.token,
        "TELEGRAM_API_BASE": api.base_url,
        "LLM_BASE_URL": llm.base_url,
        "LLM_API_KEY": "sk-bench",
        "LLM_MODEL": "fake-model",
        "DATA_DIR": str(data_dir),
        "BOT_LOCALE": "en",
        "TGBOT_PROFILE_MODULES": str(data_dir / "modules.json"),
    }


async def measure(data_dir: Path) -> ModuleProfile:
    """Start `tgbot run` in `data_dir`, warm it up, profile one mention, stop it."""
    out = data_dir / "modules.json"
    async with (
        FakeBotApi(TOKEN, username=USERNAME, first_name="Mention") as api,
        FakeOpenAIServer(ScriptedModel()) as llm,
    ):
        log_path = data_dir / "bot.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(  # noqa: ASYNC220 (started, never waited on here)
                [sys.executable, "-m", "bot.app.cli", "run"],
                cwd=ROOT,
                env=_environment(api, llm, data_dir),
                stdout=log,
                stderr=log,
            )
        store = SqlStore(create_engine_for(f"sqlite+aiosqlite:///{data_dir / 'tgbot.sqlite3'}"))
        try:
            await api.wait_for_call("getUpdates", 1, timeout=WAIT)
            await _mention(api, store, process, 1, log_path)
            await _signal(process, signal.SIGUSR1, out, "recording")
            await _mention(api, store, process, 2, log_path)
            report = await _signal(process, signal.SIGUSR2, out, "done")
        finally:
            await store.close()
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            try:
                await asyncio.to_thread(process.wait, WAIT)
            except subprocess.TimeoutExpired:
                process.kill()
    return profile_of(report)


def run() -> ModuleProfile:
    with tempfile.TemporaryDirectory(prefix="tgbot-bench-modules-") as tmp:
        return asyncio.run(measure(Path(tmp)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", action="store_true", help="list the module-to-module calls")
    parser.add_argument("--names", action="store_true", help="name each module's functions")
    args = parser.parse_args()
    print(run().markdown(with_calls=args.calls, with_names=args.names))


if __name__ == "__main__":
    main()

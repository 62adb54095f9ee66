"""`deploy/`: the systemd unit passes `systemd-analyze verify` with no warning and keeps its
hardening; `.env.example` names only settings the bot reads; what `sudo tgbot init` writes
runs the bot as an unprivileged user (the unit's)."""

from __future__ import annotations

import grp
import io
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.app.init_command import InitOptions, init
from bot.app.init_files import read_env
from bot.config import Settings
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer
from tests.bot_process import BotProcess
from tests.deadlines import EVENT, PROCESS_READY, deadline

ROOT = Path(__file__).resolve().parents[1]
UNIT = ROOT / "deploy" / "tgbot.service"
ENV_EXAMPLE = ROOT / "deploy" / ".env.example"
INSTALLED = "/opt/tgbot/.venv/bin/tgbot"


def _directives(text: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        if "=" in line and not line.lstrip().startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            found.setdefault(key.strip(), []).append(value.strip())
    return found


@pytest.mark.slow
def test_the_unit_verifies_without_a_warning(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian: apt-get install systemd)")
    unit = tmp_path / "tgbot.service"
    # verify checks that ExecStart= is executable: point it at this checkout's tgbot
    here = str(Path(sys.executable).parent / "tgbot")
    unit.write_text(UNIT.read_text().replace(INSTALLED, here))
    done = subprocess.run(
        [analyze, "verify", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "", done.stderr  # an unknown or misspelt key warns only


def test_the_unit_is_hardened_and_runs_the_installed_bot() -> None:
    unit = _directives(UNIT.read_text())
    for key, value in {
        "DynamicUser": "yes",
        "StateDirectory": "tgbot",
        "ProtectSystem": "strict",
        "NoNewPrivileges": "yes",
        "ProtectHome": "yes",
        "PrivateTmp": "yes",
        "CapabilityBoundingSet": "",
        "RestartPreventExitStatus": "2",
    }.items():
        assert unit.get(key) == [value], key
    assert unit["ExecStart"] == [f"{INSTALLED} run"]
    assert unit["ExecStartPre"] == [f"{INSTALLED} db upgrade"]
    assert "DATA_DIR=%S/tgbot" in unit["Environment"]


def test_the_env_example_names_only_settings_the_bot_reads() -> None:
    names = re.findall(r"^#?\s*([A-Z][A-Z0-9_]*)=", ENV_EXAMPLE.read_text(), re.MULTILINE)
    assert "BOT_TOKEN" in names
    sections = {n for n, f in Settings.model_fields.items() if f.annotation is not None}
    for name in names:
        head, sep, key = name.lower().partition("__")
        if name == "BOT_CONFIG" or name.endswith("_API_KEY"):
            continue
        if sep:
            section = Settings.model_fields[head].annotation
            assert isinstance(section, type), name
            assert key in section.model_fields, name
        else:
            assert head in sections, name


SERVICE_USER = ("nobody", "nogroup")
"""Who the unprivileged run is: not the files' owner, in none of their groups (as the
unit's `DynamicUser=yes` user is)."""


@pytest.fixture
def world_dir() -> Iterator[Path]:
    """A directory any user can enter, removed afterwards. Not `tmp_path`: pytest keeps that
    under `/tmp/pytest-of-root` (0700), which no other user can enter at all."""
    path = Path(tempfile.mkdtemp(prefix="tgbot-deploy-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _as_user(name: str, group: str) -> list[str]:
    return ["setpriv", f"--reuid={name}", f"--regid={group}", "--clear-groups", "--"]


def _service_python() -> tuple[str, dict[str, str]] | str:
    """An interpreter the service user can run with this checkout importable, and the
    environment it needs (it starts a child interpreter too: the schema upgrade), or why
    there is none. This one, unless it lives where that user cannot go (a Python built in
    root's home): then the system's Python of the same version on this one's packages."""
    if os.geteuid() != 0:
        return "needs root (to start a process as another user)"
    if shutil.which("setpriv") is None:
        return "setpriv is not installed (Debian: util-linux)"
    probe = (
        "import subprocess, sys, bot.app.cli; subprocess.run([sys.executable, '-V'], check=True)"
    )
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    packages = [ROOT, *(Path(p) for p in sys.path if p.endswith("site-packages"))]
    candidates = [(sys.executable, {})]
    if (system := Path("/usr/bin") / version).is_file():
        candidates.append((str(system), {"PYTHONPATH": os.pathsep.join(map(str, packages))}))
    reasons = []
    for python, env in candidates:
        done = subprocess.run(
            [*_as_user(*SERVICE_USER), python, "-c", probe],
            cwd=ROOT,
            env={"PATH": os.environ.get("PATH", ""), **env},
            capture_output=True,
            text=True,
            timeout=deadline(PROCESS_READY),
            check=False,
        )
        if done.returncode == 0:
            return python, env
        reasons.append(f"{python}: {done.stderr.strip()[-200:]}")
    return f"{SERVICE_USER[0]} cannot run this checkout: " + "; ".join(reasons)


@pytest.mark.slow
async def test_the_readme_s_init_under_sudo_starts_a_service_that_answers(
    world_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """README, Deployment: `sudo tgbot init --config /etc/tgbot/bot.toml --env-file
    /etc/tgbot/env`, then the unit: systemd reads the env file as root, and `tgbot run` runs
    as a user of its own that reads bot.toml. Run here under a strict umask (0077, as sudo
    keeps on hardened hosts), then `tgbot run` as `nobody` on what it wrote."""
    service = _service_python()
    if isinstance(service, str):
        pytest.skip(service)
    python, python_env = service
    etc = world_dir / "etc" / "tgbot"
    data = world_dir / "data"  # the unit's StateDirectory: made for the service user
    data.mkdir()
    os.chown(data, pwd.getpwnam(SERVICE_USER[0]).pw_uid, grp.getgrnam(SERVICE_USER[1]).gr_gid)
    data.chmod(0o700)
    token, group = "4242:deploy-SECRET-token", -100777
    async with (
        FakeBotApi(token, username="team_helper_bot") as api,
        FakeOpenAIServer(model_name="fake-model") as llm,
    ):
        monkeypatch.setenv("TELEGRAM_API_BASE", api.base_url)
        monkeypatch.setenv("MY_MODEL_KEY", "sk-deploy-key")
        options = InitOptions(
            interactive=False,
            token=token,
            provider="openai-compatible",
            base_url=llm.base_url,
            model="fake-model",
            api_key_env="MY_MODEL_KEY",
            owner_id=1001,
            allow_chats=(group,),
            timezone="UTC",
            locale="en",
            config=etc / "bot.toml",
            env_file=etc / "env",
        )
        umask = os.umask(0o077)
        try:
            assert await init(options, out=io.StringIO()) == 0
        finally:
            os.umask(umask)
        assert stat.S_IMODE((etc / "env").stat().st_mode) == 0o600  # the secrets stay root's
        assert stat.S_IMODE((etc / "bot.toml").stat().st_mode) == 0o644

        secrets = read_env((etc / "env").read_text(encoding="utf-8"))  # EnvironmentFile=
        bot = BotProcess(
            api, llm, data, run_as=SERVICE_USER, python=python, **secrets, **python_env
        )
        await bot.start()
        try:
            api.push_update(
                api.user_message(group, {"id": 7, "first_name": "Alice"}, "@team_helper_bot hi")
            )
            await api.wait_for_call("sendMessage", 1, timeout=deadline(EVENT))
            assert api.sent_messages(group)
        finally:
            assert await bot.stop() == 0, bot.log_tail()

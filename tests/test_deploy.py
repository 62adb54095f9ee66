"""`deploy/`: the systemd unit passes `systemd-analyze verify` with no warning and keeps its
hardening; `.env.example` names only settings the bot reads."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bot.config import Settings

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

"""`tgbot mcp list` and the MCP lines of `tgbot doctor`, against the real `mcp-server-time`
(stdio) and a URL where nothing listens; settings errors of `[[mcp.servers]]`."""

from __future__ import annotations

import io
import socket
import sys
from pathlib import Path

import pytest

from bot.app.cli import main
from bot.app.doctor import doctor
from bot.app.mcp_commands import mcp_list
from bot.config import load_settings
from bot.errors import ConfigError

SECRET = "time-env-secret-77c1d0"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("BOT_CONFIG", "DATABASE_URL", "DASHBOARD_PORT", "LLM_BASE_URL", "BOT_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DATA_DIR", str(tmp_path))
    monkeypatch.setenv("TELEGRAM_API_BASE", f"http://127.0.0.1:{free_port()}")
    path = tmp_path / "bot.toml"
    path.write_text(
        f"""
[[mcp.servers]]
name = "time"
command = "{sys.executable}"
args = ["-m", "mcp_server_time", "--local-timezone", "UTC"]
env = {{ TIME_SECRET = "{SECRET}" }}
deny = ["convert_time"]

[[mcp.servers]]
name = "gone"
url = "http://127.0.0.1:{free_port()}/mcp"
scenes = ["group"]
members = "anyone"
""",
        encoding="utf-8",
    )
    return path


@pytest.mark.slow
async def test_mcp_list_names_each_server_and_its_tools(config: Path) -> None:
    out = io.StringIO()
    code = await mcp_list(str(config), out=out)
    lines = out.getvalue().splitlines()
    assert code == 1  # one server did not start
    assert lines[0].startswith("✔ mcp time: stdio ")
    assert "1 tools, ~" in lines[0]
    assert lines[0].endswith("tokens of schemas in every request (offered in owner; run by owner)")
    assert lines[1].startswith("    time__get_current_time: [time] Get current time")
    assert lines[2].startswith("✘ mcp gone: http http://127.0.0.1:")
    assert "ConnectError" in lines[2]
    assert all(SECRET not in line for line in lines)


@pytest.mark.slow
async def test_doctor_adds_a_line_per_server(config: Path) -> None:
    out = io.StringIO()
    code = await doctor(str(config), out=out)
    lines = out.getvalue().splitlines()
    assert code == 1
    mcp = [line for line in lines if " mcp " in line]
    assert [line.split(":")[0] for line in mcp] == ["✔ mcp time", "✘ mcp gone"]


@pytest.mark.parametrize(
    ("server", "message"),
    [
        ('name = "a"', "set either command (stdio) or url (HTTP)"),
        ('name = "a"\ncommand = "x"\nurl = "http://h/"', "set either command (stdio) or url"),
        ('name = "a"\nurl = "http://h/"\nargs = ["x"]', "args, env and cwd need a command"),
        ('name = "a__b"\ncommand = "x"', "mcp.servers.0.name: expected 1-32 characters"),
        ('name = "a"\ncommand = "x"\nscenes = ["groups"]', "mcp.servers.0.scenes.0"),
        (
            'name = "a"\ncommand = "x"\nalow = ["t"]',
            "unknown key (did you mean mcp.servers.0.allow?)",
        ),
    ],
    ids=["no transport", "two transports", "args without command", "bad name", "bad scene", "typo"],
)
def test_bad_server_settings_are_refused_by_name(tmp_path: Path, server: str, message: str) -> None:
    path = tmp_path / "bot.toml"
    path.write_text(f"[[mcp.servers]]\n{server}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        load_settings(path)
    assert message in str(refused.value)


def test_without_servers_the_commands_say_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BOT_CONFIG", raising=False)
    monkeypatch.setenv("DATA_DIR", str(tmp_path))
    assert main(["mcp", "list"]) == 0
    assert main(["mcp", "reload"]) == 0
    out = capsys.readouterr().out
    assert "no MCP servers configured" in out
    assert "nothing to reload" in out

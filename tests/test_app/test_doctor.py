"""`tgbot doctor`: one ✔/✘ line per check against a fake Bot API and a fake OpenAI-compatible
server on 127.0.0.1; non-zero when any check fails."""

from __future__ import annotations

import io
import socket
from pathlib import Path

import pytest

from adapters.llm.fake_server import FakeOpenAIServer
from adapters.telegram.fake_api import FakeBotApi
from bot.app.doctor import doctor
from storage.migrate import upgrade_database

TOKEN = "123456:doctor-SECRET-token"


@pytest.fixture
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("BOT_CONFIG", "DATABASE_URL", "DASHBOARD_PORT", "DASHBOARD_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setenv("DATA_DIR", str(data))
    monkeypatch.setenv("BOT_TOKEN", TOKEN)
    return data


async def _run() -> tuple[int, list[str]]:
    out = io.StringIO()
    code = await doctor(None, out=out)
    return code, out.getvalue().splitlines()


async def test_every_check_passes_on_a_healthy_setup(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await upgrade_database(f"sqlite+aiosqlite:///{clean_env / 'tgbot.sqlite3'}")
    async with FakeBotApi(TOKEN, username="doc_bot") as api, FakeOpenAIServer() as llm:
        monkeypatch.setenv("TELEGRAM_API_BASE", api.base_url)
        monkeypatch.setenv("LLM_BASE_URL", llm.base_url)
        code, lines = await _run()
        assert len(llm.requests) == 1  # one tiny request
    assert code == 0, lines
    assert [line.split(":")[0] for line in lines] == [
        "✔ settings",
        "✔ database",
        "✔ DATA_DIR",
        "✔ Telegram",
        "✔ model",
        "✔ images",
        "✔ dashboard",
    ]
    assert "@doc_bot" in lines[3]
    assert "vision off for default" in lines[5]
    assert "cache reads" in lines[4]
    assert "cache writes" in lines[4]
    assert all(TOKEN not in line for line in lines)


async def test_each_failure_is_one_line_and_the_exit_code_says_so(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # no database yet, a token the Bot API refuses, nothing listening for the model, a
    # dashboard port already taken
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        async with FakeBotApi("999:another-token") as api:
            monkeypatch.setenv("TELEGRAM_API_BASE", api.base_url)
            monkeypatch.setenv("LLM_BASE_URL", "http://127.0.0.1:9/v1")
            monkeypatch.setenv("DASHBOARD_PORT", str(port))
            code, lines = await _run()
    assert code == 1
    assert len(lines) == 7, lines
    marks = {line.split(":")[0] for line in lines}
    assert marks == {
        "✔ settings",
        "✘ database",
        "✔ DATA_DIR",
        "✘ Telegram",
        "✘ model",
        "✔ images",
        "✘ dashboard",
    }
    assert not (clean_env / "tgbot.sqlite3").exists()  # the check created nothing
    assert all(TOKEN not in line for line in lines)


async def test_bad_settings_stop_at_the_first_line(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOT_TIMEZONE", "Mars/Base")
    code, lines = await _run()
    assert code == 2
    assert len(lines) == 1
    assert lines[0].startswith("✘ settings: BOT_TIMEZONE: unknown time zone")


async def test_doctor_says_which_routes_see_images(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "bot.toml"
    config.write_text(
        '[providers.claude]\nbase_url = "https://api.anthropic.com"\nkind = "anthropic"\n'
        "vision = true\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("LLM_VISION", "true")
    out = io.StringIO()
    await doctor(str(config), out=out)
    (line,) = [line for line in out.getvalue().splitlines() if line.startswith("✔ images")]
    assert "vision on for claude, default" in line, line

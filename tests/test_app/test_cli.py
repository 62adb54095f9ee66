"""The `tgbot` command line: help, version, and every start-up mistake as one line with exit
code 2 — in-process (fast) and through the real CLI (`python -m bot.app.cli`, slow)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bot.app.cli import main, package_version
from tests.deadlines import PROCESS_READY, deadline
from tests.test_app.conftest import ROOT, cli_env, tgbot

COMMANDS = [
    ["run"],
    ["demo"],
    ["usage", "report"],
    ["context", "show"],
    ["import-legacy"],
    ["db", "upgrade"],
    ["dashboard"],
    ["doctor"],
]


@pytest.mark.parametrize("argv", [["--help"], *COMMANDS], ids=lambda a: " ".join(a))
def test_every_command_has_help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([*argv, "--help"] if argv != ["--help"] else argv)
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "usage: tgbot" in out
    if argv != ["--help"]:
        assert "environment: " in out  # names the variables the command reads
        assert "BOT_CONFIG" in out


@pytest.mark.parametrize(
    ("argv", "variable"),
    [
        (["run"], "BOT_TOKEN"),
        (["run"], "WEBHOOK_SECRET"),
        (["usage", "report"], "DATA_DIR"),
        (["context", "show"], "DATABASE_URL"),
        (["dashboard"], "DASHBOARD_TOKEN"),
        (["doctor"], "LLM_BASE_URL"),
    ],
    ids=lambda v: v if isinstance(v, str) else " ".join(v),
)
def test_help_names_the_env_variables_read(
    argv: list[str], variable: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    epilog = capsys.readouterr().out.split("environment: ", 1)[1]
    assert variable in epilog


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"tgbot {package_version()}"


# ---------------------------------------------------------------- in-process: fast


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A clean environment with a data directory and a model endpoint (nothing listens)."""
    for name in list(os.environ):
        if name.startswith(("BOT_", "LLM_", "DATABASE_", "DATA_", "DASHBOARD_", "WEBHOOK_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("BOT_TOKEN", "123456:SECRET-bot-token")
    monkeypatch.setenv("LLM_BASE_URL", "http://127.0.0.1:9/v1")
    return tmp_path


MISTAKES = [
    pytest.param({"BOT_TOKEN": None}, ["run"], "BOT_TOKEN: required", id="no-token"),
    pytest.param({"BOT_TOKEN": "not a token"}, ["run"], "BOT_TOKEN: malformed", id="bad-token"),
    pytest.param({"LLM_BASE_URL": None}, ["run"], "LLM_BASE_URL: unset", id="offline-without-flag"),
    pytest.param(
        {"DATABASE_URL": "mysql://bot:hunter2@db/tgbot"},
        ["run"],
        "DATABASE_URL: unsupported database 'mysql' in mysql://bot:***@db/tgbot",
        id="mysql",
    ),
    pytest.param(
        {"DATABASE_URL": "not a url"}, ["db", "upgrade"], "DATABASE_URL: cannot parse", id="junk"
    ),
    pytest.param(
        {"DATABASE_URL": "mysql://bot:hunter2@db/tgbot"},
        ["usage", "report"],
        "DATABASE_URL: unsupported database",
        id="mysql-read",
    ),
    pytest.param({"DASHBOARD_TOKEN": ""}, ["dashboard"], "DASHBOARD_TOKEN: empty", id="dash-empty"),
    pytest.param(
        {"DASHBOARD_TOKEN": "short"}, ["run"], "DASHBOARD_TOKEN: too short", id="dash-short"
    ),
    pytest.param(
        {"HISTORY__GROUP_TOKEN": "5"},
        ["context", "show", "--chat", "1"],
        "HISTORY__GROUP_TOKEN: unknown setting (did you mean HISTORY__GROUP_TOKENS?)",
        id="env-typo",
    ),
]


@pytest.mark.parametrize(("settings", "argv", "expected"), MISTAKES)
def test_a_mistake_is_one_line_and_exit_code_2(
    env: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    settings: dict[str, str | None],
    argv: list[str],
    expected: str,
) -> None:
    for name, value in settings.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert main(argv) == 2
    line = _one_line(capsys)
    assert line.startswith("tgbot: "), line
    assert expected in line
    assert "hunter2" not in line
    assert "SECRET-bot-token" not in line


def test_an_unwritable_data_dir_is_one_line(
    env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = env / "a-file"
    blocker.write_text("", encoding="utf-8")
    monkeypatch.setenv("DATA_DIR", str(blocker / "data"))
    assert main(["db", "upgrade"]) == 2
    assert _one_line(capsys).startswith(f"tgbot: DATA_DIR: {blocker / 'data'} is not writable")


def test_a_toml_typo_is_one_line(
    env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = env / "bot.toml"
    config.write_text("[security]\nallowed_chat = [1]\n", encoding="utf-8")
    assert main(["--config", str(config), "run"]) == 2
    assert _one_line(capsys) == (
        f"tgbot: {config}: security.allowed_chat: unknown key "
        "(did you mean security.allowed_chats?)"
    )


def test_read_commands_create_nothing_and_say_what_they_read(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = env / "data"
    assert main(["context", "show", "--chat", "1"]) == 2
    err = capsys.readouterr().err
    assert f"reading DATA_DIR={data}" in err
    assert "no database at" in err
    assert main(["usage", "report", "--days", "1"]) == 0
    captured = capsys.readouterr()
    assert f"reading DATA_DIR={data}" in captured.err
    assert "warning: DATA_DIR" in captured.err
    assert not data.exists()  # neither a directory nor an empty database was made


# ---------------------------------------------------------------- through the real CLI


def _run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.app.cli", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


NOTES = ("tgbot: reading ", "tgbot: warning: ")
"""What a read command says before it reads (what it reads, that nothing is there yet)."""


def _assert_one_line(done: subprocess.CompletedProcess[str], expected: str) -> None:
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.strip().splitlines() if not line.startswith(NOTES)]
    assert len(lines) == 1, done.stderr
    assert expected in lines[0], lines[0]
    assert "Traceback" not in done.stderr
    assert "SECRET-bot-token" not in done.stderr
    assert "hunter2" not in done.stderr


@pytest.mark.slow
def test_bad_timezone_is_one_line_naming_the_setting() -> None:
    done = _run_cli("run", env={"BOT_TIMEZONE": "Mars/Base", "PATH": ""})
    _assert_one_line(done, "BOT_TIMEZONE")


@pytest.mark.slow
def test_a_missing_token_is_reported_in_under_a_second(tmp_path: Path) -> None:
    env = cli_env(tmp_path)
    del env["BOT_TOKEN"]
    started = time.perf_counter()
    done = _run_cli("run", env=env)
    elapsed = time.perf_counter() - started
    _assert_one_line(done, "BOT_TOKEN: required")
    # generous for a loaded machine: importing aiogram first took 3.7-16 s
    assert elapsed < 3.0, elapsed


@pytest.mark.slow
@pytest.mark.parametrize(
    ("argv", "extra", "expected"),
    [
        (["run"], {"BOT_TOKEN": "not-a-token"}, "BOT_TOKEN: malformed"),
        (["run"], {"DATABASE_URL": "mysql://bot:hunter2@db/x"}, "unsupported database"),
        (["db", "upgrade"], {"DATABASE_URL": "::junk::"}, "DATABASE_URL: cannot parse"),
        (
            ["db", "upgrade"],
            {"DATABASE_URL": "postgresql+asyncpg://bot:hunter2@127.0.0.1:9/x"},
            "DATABASE_URL: cannot connect to postgresql+asyncpg://bot:***@127.0.0.1:9/x",
        ),
        (
            ["context", "show", "--chat", "1"],
            {"DATABASE_URL": "postgresql+asyncpg://bot:hunter2@127.0.0.1:9/x"},
            "DATABASE_URL: cannot connect",
        ),
        (["run"], {"LLM_BASE_URL": ""}, "LLM_BASE_URL: unset"),
        (["dashboard"], {"DASHBOARD_TOKEN": ""}, "DASHBOARD_TOKEN: empty"),
        (["import-legacy", "x.jsonl"], {"DATABASE_URL": "mysql://a/b"}, "unsupported database"),
    ],
    ids=[
        "bad-token",
        "mysql",
        "junk-url",
        "refused-upgrade",
        "refused-read",
        "offline",
        "dash-token",
        "legacy-mysql",
    ],
)
def test_a_start_up_mistake_through_the_cli(
    tmp_path: Path, argv: list[str], extra: dict[str, str], expected: str
) -> None:
    env = cli_env(tmp_path / "data", **{"LLM_BASE_URL": "http://127.0.0.1:9/v1", **extra})
    if env["LLM_BASE_URL"] == "":
        del env["LLM_BASE_URL"]
    _assert_one_line(_run_cli(*argv, env=env), expected)


@pytest.mark.slow
def test_an_unwritable_data_dir_through_the_cli(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    env = cli_env(blocker / "data", LLM_BASE_URL="http://127.0.0.1:9/v1")
    for argv in (["run"], ["db", "upgrade"], ["demo", "--data-dir", str(blocker / "d")]):
        _assert_one_line(_run_cli(*argv, env=env), "is not writable")


@pytest.mark.slow
async def test_telegram_failures_after_the_database_was_migrated(tmp_path: Path) -> None:
    """The database is at head, so nothing is logged before the failure."""
    env = cli_env(tmp_path / "data", LLM_BASE_URL="http://127.0.0.1:9/v1")
    assert (await tgbot("db", "upgrade", env=env)).code == 0
    unreachable = await tgbot("run", env={**env, "TELEGRAM_API_BASE": "http://127.0.0.1:9"})
    assert unreachable.code == 2, unreachable.err
    assert unreachable.err.strip().splitlines() == [unreachable.err.strip().splitlines()[0]], (
        unreachable.err
    )
    assert unreachable.err.startswith("tgbot: TELEGRAM_API_BASE: cannot reach http://127.0.0.1:9")
    assert "SECRET-bot-token" not in unreachable.err


@pytest.mark.slow
async def test_a_token_telegram_refuses_is_one_line(tmp_path: Path) -> None:
    from adapters.telegram.fake_api import FakeBotApi

    env = cli_env(tmp_path / "data", LLM_BASE_URL="http://127.0.0.1:9/v1")
    assert (await tgbot("db", "upgrade", env=env)).code == 0
    async with FakeBotApi("999:the-real-one") as api:
        done = await asyncio.wait_for(
            tgbot("run", env={**env, "TELEGRAM_API_BASE": api.base_url}), 60
        )
    assert done.code == 2, done.err
    lines = done.err.strip().splitlines()
    assert len(lines) == 1, done.err
    assert lines[0].startswith("tgbot: BOT_TOKEN: refused by"), lines[0]
    assert "SECRET-bot-token" not in done.err


# ---------------------------------------------------------------- the start-up banner


def test_the_banner_names_the_offline_model_and_masks_the_password(tmp_path: Path) -> None:
    from bot.app.serve import start_banner
    from bot.config import load_settings

    settings = load_settings(
        data_dir=tmp_path,
        database_url="postgresql+asyncpg://bot:hunter2@db/tgbot",
        dashboard_port=8081,
    )
    line = start_banner(settings, username="helper_bot", webhook=False, host="", port=0)
    assert line == (
        "bot @helper_bot started; polling https://api.telegram.org; the offline model: "
        "replies are canned; database postgresql+asyncpg://bot:***@db/tgbot; "
        f"DATA_DIR={tmp_path}; dashboard http://127.0.0.1:8081/"
    )


@pytest.mark.slow
async def test_run_logs_one_banner_line(tmp_path: Path) -> None:
    from adapters.llm.fake_server import FakeOpenAIServer
    from adapters.telegram.fake_api import FakeBotApi
    from tests.bot_process import bot_running

    async with (
        FakeBotApi("4242:banner-token", username="banner_bot") as api,
        FakeOpenAIServer() as llm,
        bot_running(api, llm, tmp_path, LLM_MODEL="fake-model") as bot,
    ):
        banners = [line for line in bot.log().splitlines() if " started; " in line]
    assert len(banners) == 1, bot.log()
    assert banners[0].endswith(
        f"bot @banner_bot started; polling {api.base_url}; model default:fake-model at "
        f"{llm.base_url}; database sqlite+aiosqlite:///{tmp_path}/tgbot.sqlite3; "
        f"DATA_DIR={tmp_path}; dashboard off (DASHBOARD_PORT unset)"
    )


@pytest.mark.slow
def test_a_missing_token_is_refused_before_aiogram_is_imported(tmp_path: Path) -> None:
    """What made the refusal take 10-16 s: all of aiogram imported first."""
    env = cli_env(tmp_path)
    del env["BOT_TOKEN"]
    probe = (
        "import sys\n"
        "from bot.app.cli import main\n"
        "code = main(['run'])\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'aiogram', 'sqlalchemy', "
        "'aiohttp', 'alembic', 'httpx', 'apscheduler', 'jinja2'})\n"
        "print(code, ','.join(heavy) or '-')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=deadline(PROCESS_READY),
        check=False,
    )
    assert done.stdout.split() == ["2", "-"], done.stdout + done.stderr

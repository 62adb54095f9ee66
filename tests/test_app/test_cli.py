"""The `tgbot` command line: help, version, and every start-up mistake as one line with exit
code 2 — in-process (fast) and through the real CLI (`python -m bot.app.cli`, slow)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.app.cli import main, package_version
from tests.deadlines import PROCESS_READY, deadline
from tests.test_app.conftest import ROOT, Done, cli_env, run_cli, tgbot_here

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
        {"LLM_REASONING": "hard"}, ["run"], "LLM_REASONING: Input should be", id="reasoning"
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


# ------------------------------------- the whole environment, as a shell passes it


NOTES = ("tgbot: reading ", "tgbot: warning: ")
"""What a read command says before it reads (what it reads, that nothing is there yet)."""


def _assert_one_line(done: Done, expected: str) -> None:
    assert done.code == 2, done.err
    lines = [line for line in done.err.strip().splitlines() if not line.startswith(NOTES)]
    assert len(lines) == 1, done.err
    assert expected in lines[0], lines[0]
    assert "Traceback" not in done.err
    assert "SECRET-bot-token" not in done.err
    assert "hunter2" not in done.err


def test_bad_timezone_is_one_line_naming_the_setting() -> None:
    _assert_one_line(run_cli("run", env={"BOT_TIMEZONE": "Mars/Base"}), "BOT_TIMEZONE")


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
def test_a_start_up_mistake_with_the_cli_environment(
    tmp_path: Path, argv: list[str], extra: dict[str, str], expected: str
) -> None:
    """The mistakes above again, with the whole environment as a shell would pass it."""
    env = cli_env(tmp_path / "data", **{"LLM_BASE_URL": "http://127.0.0.1:9/v1", **extra})
    if env["LLM_BASE_URL"] == "":
        del env["LLM_BASE_URL"]
    _assert_one_line(run_cli(*argv, env=env), expected)


@pytest.mark.parametrize("argv", [["run"], ["db", "upgrade"], ["demo", "--data-dir", "{d}"]])
def test_an_unwritable_data_dir_for_each_command_that_writes(
    tmp_path: Path, argv: list[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    env = cli_env(blocker / "data", LLM_BASE_URL="http://127.0.0.1:9/v1")
    argv = [a.format(d=blocker / "d") for a in argv]
    _assert_one_line(run_cli(*argv, env=env), "is not writable")


def test_telegram_failures_after_the_database_was_migrated(tmp_path: Path) -> None:
    """The database is at head, so nothing is said before the failure."""
    env = cli_env(tmp_path / "data", LLM_BASE_URL="http://127.0.0.1:9/v1")
    assert run_cli("db", "upgrade", env=env).code == 0
    unreachable = run_cli("run", env={**env, "TELEGRAM_API_BASE": "http://127.0.0.1:9"})
    assert unreachable.code == 2, unreachable.err
    assert len(unreachable.err.strip().splitlines()) == 1, unreachable.err
    assert unreachable.err.startswith("tgbot: TELEGRAM_API_BASE: cannot reach http://127.0.0.1:9")
    assert "SECRET-bot-token" not in unreachable.err


async def test_a_token_telegram_refuses_is_one_line(tmp_path: Path) -> None:
    from testkit.fake_bot_api import FakeBotApi

    env = cli_env(tmp_path / "data", LLM_BASE_URL="http://127.0.0.1:9/v1")
    assert (await tgbot_here("db", "upgrade", env=env)).code == 0
    async with FakeBotApi("999:the-real-one") as api:
        done = await tgbot_here("run", env={**env, "TELEGRAM_API_BASE": api.base_url})
    assert done.code == 2, done.err
    lines = done.err.strip().splitlines()
    assert len(lines) == 1, done.err
    assert lines[0].startswith("tgbot: BOT_TOKEN: refused by"), lines[0]
    assert "SECRET-bot-token" not in done.err


# ---------------------------------------------------------------- the start-up banner


def test_the_banner_names_the_offline_model_and_masks_the_password(tmp_path: Path) -> None:
    from bot.app.startup import start_banner
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


def test_the_banner_says_when_the_messages_api_was_read_from_the_url(tmp_path: Path) -> None:
    from bot.app.startup import start_banner
    from bot.config import load_settings

    def banner(**settings: object) -> str:
        loaded = load_settings(data_dir=tmp_path, llm_model="claude-sonnet-4-5", **settings)
        return start_banner(loaded, username="b", webhook=False, host="", port=0)

    inferred = banner(llm_base_url="https://api.anthropic.com")
    assert (
        "model default:claude-sonnet-4-5 at https://api.anthropic.com (Anthropic Messages API, "
        "inferred from the URL; LLM_KIND overrides); "
    ) in inferred
    assert "inferred" not in banner(llm_base_url="https://api.anthropic.com", llm_kind="anthropic")
    assert "inferred" not in banner(llm_base_url="https://api.deepseek.com")


# ------------------------------------------------- through the real CLI: one test per command
# run and demo here; usage report, context show, import-legacy and db upgrade in their own
# files (test_usage_command.py, test_context_show.py, test_import_legacy.py,
# test_db_upgrade.py); dashboard in test_dashboard/test_auth.py; doctor here.

HEAVY = ("aiogram", "sqlalchemy", "aiohttp", "alembic", "httpx", "apscheduler", "jinja2")


def _run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "bot.app.cli", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=deadline(PROCESS_READY),
        check=False,
    )


def _split_importtime(stderr: str) -> tuple[set[str], str]:
    """The top-level packages `-X importtime` reports, and the rest of stderr."""
    imported, rest = set(), []
    for line in stderr.splitlines():
        if line.startswith("import time:"):
            imported.add(line.rsplit("|", 1)[-1].strip().split(".")[0])
        else:
            rest.append(line)
    return imported, "\n".join(rest)


@pytest.mark.slow
def test_run_without_a_token_is_one_line_before_anything_heavy_is_imported(
    tmp_path: Path,
) -> None:
    """`python -m bot.app.cli run`: exit code 2, one line, and none of aiogram, the database
    stack or the HTTP clients imported (importing aiogram first made this take 10-16 s)."""
    env = cli_env(tmp_path)
    del env["BOT_TOKEN"]
    done = _run_cli("run", env=env)
    imported, err = _split_importtime(done.stderr)
    assert "bot" in imported  # the probe sees the CLI's own imports
    assert done.returncode == 2, err
    assert err.strip().splitlines() == [
        "tgbot: BOT_TOKEN: required for `tgbot run` (use `tgbot demo` offline)"
    ]
    assert imported.isdisjoint(HEAVY), sorted(imported & set(HEAVY))


@pytest.mark.slow
def test_demo_refuses_a_bots_data_through_the_cli(tmp_path: Path) -> None:
    (tmp_path / "tgbot.sqlite3").write_bytes(b"a real bot's database")
    done = _run_cli("demo", "--data-dir", str(tmp_path), env=cli_env(tmp_path / "unused"))
    _imported, err = _split_importtime(done.stderr)
    assert done.returncode == 2, err
    (line,) = err.strip().splitlines()
    assert line.startswith("tgbot: --data-dir: "), line
    assert "the demo did not write" in line, line
    assert (tmp_path / "tgbot.sqlite3").read_bytes() == b"a real bot's database"


@pytest.mark.slow
def test_doctor_through_the_cli_says_what_fails_and_exits_non_zero(tmp_path: Path) -> None:
    env = cli_env(
        tmp_path / "data",
        LLM_BASE_URL="http://127.0.0.1:9/v1",
        TELEGRAM_API_BASE="http://127.0.0.1:9",
    )
    done = _run_cli("doctor", env=env)
    _imported, err = _split_importtime(done.stderr)
    assert done.returncode != 0, done.stdout + err
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith("✔ settings"), lines
    assert any(line.startswith("✘ Telegram") for line in lines), lines
    assert "Traceback" not in err
    assert "SECRET-bot-token" not in done.stdout + err

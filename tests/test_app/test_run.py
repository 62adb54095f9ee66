"""`tgbot run` refuses to start without its token or, for a webhook, its secret, in one
clear line; in this process (`tgbot run` as a process: tests/test_app/test_cli.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_app.conftest import cli_env, run_cli


def test_run_without_bot_token_exits_with_one_clear_line(tmp_path: Path) -> None:
    env = cli_env(tmp_path)
    del env["BOT_TOKEN"]
    done = run_cli("run", env=env)
    assert done.code != 0
    assert done.out == ""
    lines = done.err.strip().splitlines()
    assert len(lines) == 1, done.err
    assert "BOT_TOKEN" in lines[0]
    assert "Traceback" not in done.err
    assert "sk-live" not in done.err


def test_a_webhook_without_a_secret_is_refused_in_one_line(tmp_path: Path) -> None:
    env = cli_env(tmp_path)
    env.pop("WEBHOOK_SECRET", None)
    done = run_cli("run", "--webhook", env=env)
    assert done.code == 2
    lines = done.err.strip().splitlines()
    assert len(lines) == 1, done.err
    assert "WEBHOOK_SECRET" in lines[0]
    assert "--insecure-webhook" in lines[0]
    assert "SECRET-bot-token" not in done.err


@pytest.mark.slow  # `tgbot run` creates its new database's schema in a child process
def test_the_secret_or_an_explicit_insecure_flag_passes_that_check(tmp_path: Path) -> None:
    # nothing listens on the API base: the run gets past the webhook check, then fails
    unreachable = {"TELEGRAM_API_BASE": "http://127.0.0.1:9"}
    with_secret = run_cli(
        "run",
        "--webhook",
        "--offline",
        env=cli_env(tmp_path / "a", WEBHOOK_SECRET="s3cret-header", **unreachable),
    )
    insecure = run_cli(
        "run",
        "--webhook",
        "--insecure-webhook",
        "--offline",
        env=cli_env(tmp_path / "b", **unreachable),
    )
    for done in (with_secret, insecure):
        assert done.code == 2
        assert "TELEGRAM_API_BASE: cannot reach http://127.0.0.1:9" in done.err, done.err
        assert "WEBHOOK_SECRET" not in done.err, done.err
        assert "SECRET-bot-token" not in done.err

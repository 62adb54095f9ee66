"""`tgbot run` refuses to start without its token, in one clear line."""

from __future__ import annotations

from pathlib import Path

from tests.test_app.conftest import cli_env, tgbot


async def test_run_without_bot_token_exits_with_one_clear_line(tmp_path: Path) -> None:
    env = cli_env(tmp_path)
    del env["BOT_TOKEN"]
    done = await tgbot("run", env=env)
    assert done.code != 0
    assert done.out == ""
    lines = done.err.strip().splitlines()
    assert len(lines) == 1, done.err
    assert "BOT_TOKEN" in lines[0]
    assert "Traceback" not in done.err
    assert "sk-live" not in done.err

from __future__ import annotations

import subprocess
import sys

import pytest

from bot.app.cli import main
from tests.deadlines import PROCESS_READY, deadline


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["run", "--help"],
        ["demo", "--help"],
        ["usage", "report", "--help"],
        ["context", "show", "--help"],
        ["import-legacy", "--help"],
        ["db", "upgrade", "--help"],
    ],
    ids=lambda a: " ".join(a),
)
def test_every_command_has_help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 0
    assert "usage: tgbot" in capsys.readouterr().out


@pytest.mark.slow
def test_bad_timezone_is_one_line_naming_the_setting() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bot.app.cli", "run"],
        env={"BOT_TIMEZONE": "Mars/Base", "PATH": ""},
        capture_output=True,
        text=True,
        timeout=deadline(PROCESS_READY),
        check=False,
    )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "BOT_TIMEZONE" in lines[0]
    assert "Traceback" not in done.stderr

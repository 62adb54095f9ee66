"""Rules the test suite keeps so its inner loop (`pytest -m "not slow"`) stays fast."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_DRIVE_THE_RIG = """
import asyncio, sys, tempfile
from pathlib import Path

from testkit.memory_store import InMemoryStore
from tests.fakes import RecordingMessenger
from tests.rig import rig_settings, wire_app


async def main() -> None:
    app = wire_app(
        rig_settings(Path(tempfile.mkdtemp())),
        store=InMemoryStore(),
        messenger=RecordingMessenger(),
    )
    await app.routes.aclose()


asyncio.run(main())
print(sorted({name.split(".")[0] for name in sys.modules} & {"aiogram"}))
"""


@pytest.mark.slow
def test_the_in_process_rig_imports_no_telegram_client() -> None:
    """A fresh interpreter imports `tests.rig` and wires an app: aiogram (seconds to import)
    stays unloaded; only `tests.polling_rig` brings it."""
    done = subprocess.run(
        [sys.executable, "-c", _DRIVE_THE_RIG],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"

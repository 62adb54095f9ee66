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


def test_each_xdist_worker_gets_a_database_of_its_own() -> None:
    """Workers reset the `public` schema of their database before each test: one shared
    database would be reset under another worker's running test."""
    from tests.conftest import worker_database_url

    url = "postgresql+asyncpg://postgres@127.0.0.1:5432/tgbot_test"
    own, server, name = worker_database_url(url, "gw3")
    assert own == "postgresql+asyncpg://postgres@127.0.0.1:5432/tgbot_test_gw3"
    assert server == "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"
    assert name == "tgbot_test_gw3"
    assert worker_database_url(url + "?ssl=disable", "gw0")[0].endswith(
        "tgbot_test_gw0?ssl=disable"
    )
    with pytest.raises(ValueError, match="cannot name a database"):
        worker_database_url(url, "gw0; DROP")

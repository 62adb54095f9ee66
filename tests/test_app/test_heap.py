"""`settle_heap`: what start-up built is frozen out of collections; turns' objects die young."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import gc, json
import bot.app.serve  # what `tgbot run` has imported by then
from bot.app.heap import settle_heap
before = gc.get_freeze_count()
settle_heap()
print(json.dumps({"before": before, "frozen": gc.get_freeze_count(),
                  "threshold": gc.get_threshold()}))
"""


@pytest.mark.slow
def test_serving_freezes_start_up_objects_and_raises_the_young_threshold() -> None:
    # a process of its own: the settings are process-wide and would leak into other tests
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, check=True
    )
    probe = json.loads(out.stdout)
    assert probe["before"] == 0
    assert probe["frozen"] > 100_000, "aiogram's and pydantic's types are frozen"
    assert probe["threshold"][0] >= 10_000

"""docs/architecture.md's module map is written from the code and must match it."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def _layout() -> ModuleType:
    spec = importlib.util.spec_from_file_location("layout", ROOT / "scripts" / "layout.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_module_map_in_docs_matches_the_code() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert _layout().rewrite(page) == page, "module map out of date: run scripts/layout.py"


def test_a_stale_map_is_rewritten_from_the_code() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    stale = page.replace("| `bot/agent/window.py` |", "| `bot/agent/old_window.py` |")
    assert stale != page
    assert _layout().rewrite(stale) == page

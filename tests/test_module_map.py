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


def test_the_readme_layout_names_every_package_of_bot() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    for package in sorted(p.parent.name for p in (ROOT / "bot").glob("*/__init__.py")):
        assert f"`{package}`" in section, package
    for path in ("bot/config.py", "adapters/", "storage/", "testkit/", "scripts/", "deploy/"):
        assert f"`{path}`" in section, path
        assert (ROOT / path).exists(), path
    for path in ("ports.py", "store_ports.py"):
        assert f"`{path}`" in section, path
        assert (ROOT / "bot" / path).is_file(), path

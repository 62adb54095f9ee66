"""The dependency direction of DESIGN.md §1: the core imports no I/O and no outer layer."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FORBIDDEN_IN_CORE = (
    "adapters",
    "storage",
    "aiogram",
    "aiohttp",
    "httpx",
    "sqlalchemy",
    "sqlmodel",
    "asyncio",
    "apscheduler",
    "bot.agent",
    "bot.services",
    "bot.tools",
    "bot.main",
    "bot.cli",
    "bot.config",
    "socket",
    "subprocess",
)


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def violations(package: str, forbidden: tuple[str, ...]) -> list[str]:
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for module in imported_modules(path):
            if any(module == f or module.startswith(f + ".") for f in forbidden):
                found.append(f"{path.relative_to(ROOT)} imports {module}")
    return found


@pytest.mark.parametrize("package", ["bot/domain", "bot/context"])
def test_core_imports_no_io_and_no_outer_layer(package: str) -> None:
    assert violations(package, FORBIDDEN_IN_CORE) == []


def test_domain_does_not_import_the_context_core() -> None:
    assert violations("bot/domain", ("bot.context",)) == []


def test_sql_rows_never_leave_storage() -> None:
    outside = [p for p in ("bot", "adapters") if (ROOT / p).exists()]
    found = [v for p in outside for v in violations(p, ("sqlmodel", "storage.tables"))]
    assert found == []


def test_aiogram_lives_only_in_the_telegram_adapter() -> None:
    found = [v for p in ("bot", "storage") for v in violations(p, ("aiogram",))]
    assert found == []


def test_the_checker_sees_a_forbidden_import(tmp_path: Path) -> None:
    sample = tmp_path / "m.py"
    sample.write_text("import asyncio\nfrom sqlalchemy import select\n", encoding="utf-8")
    assert imported_modules(sample) == {"asyncio", "sqlalchemy"}

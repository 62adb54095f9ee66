"""The dependency direction (docs/architecture.md, Layers): the core imports no I/O and no
outer layer, only the composition root (`bot/app`) reaches the adapters, the storage and the
settings, and no two modules import each other, directly or round a circle."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Mapping
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
    "bot.app",
    "bot.config",
    "socket",
    "subprocess",
)


@functools.cache
def parsed(path: Path) -> ast.Module:
    """The module's syntax tree, parsed once for all the checks (they only read it)."""
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def imported_modules(path: Path) -> set[str]:
    tree = parsed(path)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def python_files(where: Path) -> list[Path]:
    return [where] if where.is_file() else sorted(where.rglob("*.py"))


def violations(package: str, forbidden: tuple[str, ...]) -> list[str]:
    found = []
    for path in python_files(ROOT / package):
        for module in imported_modules(path):
            if any(module == f or module.startswith(f + ".") for f in forbidden):
                found.append(f"{path.relative_to(ROOT)} imports {module}")
    return found


@pytest.mark.parametrize("package", ["bot/domain", "bot/context"])
def test_core_imports_no_io_and_no_outer_layer(package: str) -> None:
    assert violations(package, FORBIDDEN_IN_CORE) == []


# what only the composition root may import
OUTER = ("adapters", "storage", "bot.config", "bot.app")


@pytest.mark.parametrize(
    "package",
    [
        "bot/domain",
        "bot/context",
        "bot/agent",
        "bot/services",
        "bot/tools",
        "bot/ports.py",
        "bot/errors.py",
    ],
)
def test_only_the_app_imports_adapters_storage_and_settings(package: str) -> None:
    assert violations(package, OUTER) == []


@pytest.mark.parametrize("package", ["adapters", "storage"])
def test_adapters_and_storage_import_neither_the_app_nor_the_settings(package: str) -> None:
    assert violations(package, ("bot.app", "bot.config")) == []


def test_domain_does_not_import_the_context_core() -> None:
    assert violations("bot/domain", ("bot.context",)) == []


def test_sql_rows_never_leave_storage() -> None:
    outside = [p for p in ("bot", "adapters") if (ROOT / p).exists()]
    found = [v for p in outside for v in violations(p, ("sqlmodel", "storage.tables"))]
    assert found == [], "\n".join(found)


def test_aiogram_lives_only_in_the_telegram_adapter() -> None:
    found = [v for p in ("bot", "storage") for v in violations(p, ("aiogram",))]
    assert found == [], "\n".join(found)


def test_the_checker_sees_a_forbidden_import(tmp_path: Path) -> None:
    sample = tmp_path / "m.py"
    sample.write_text("import asyncio\nfrom sqlalchemy import select\n", encoding="utf-8")
    assert imported_modules(sample) == {"asyncio", "sqlalchemy"}


# ---------------------------------------------------------------- import circles

PACKAGES = ("bot", "adapters", "storage")


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph(root: Path, packages: Iterable[str] = PACKAGES) -> dict[str, set[str]]:
    """Module → the modules of `packages` it imports, at module level or inside a function
    (`from pkg import name` points at `pkg.name` when that is a module, else at `pkg`)."""
    files = {
        module_name(path, root): path
        for package in packages
        for path in sorted((root / package).rglob("*.py"))
    }

    def known(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        targets: set[str | None] = set()
        tree = parsed(path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets.update(known(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    here = (
                        module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                    )
                    here = here[: len(here) - node.level + 1]
                    base = ".".join([*here, base] if base else here)
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    targets.add(full if full in files else known(base))
        graph[module] = {t for t in targets if t is not None and t != module}
    return graph


def import_circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each as a circle
    path `a → b → … → a` through the component."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(start: str) -> None:
        # iterative Tarjan: (node, iterator over its successors)
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: set[str] = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(component)

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return [circle_through(graph, component) for component in components]


def circle_through(graph: Mapping[str, set[str]], component: set[str]) -> list[str]:
    """One shortest path from the component's first module back to itself."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph.get(node, set()) & component):
                if nxt == start:
                    return [*paths[node], start]
                if nxt not in paths:
                    paths[nxt] = [*paths[node], nxt]
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"not a circle: {sorted(component)}")


def test_no_module_imports_itself_round_a_circle() -> None:
    circles = import_circles(import_graph(ROOT))
    assert circles == [], "import circles:\n" + "\n".join(" → ".join(c) for c in circles)


def test_the_circle_finder_sees_a_circle_inside_functions(tmp_path: Path) -> None:
    package = tmp_path / "bot"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "a.py").write_text("from bot.b import f\n", encoding="utf-8")
    (package / "b.py").write_text("def f():\n    from bot import c\n", encoding="utf-8")
    (package / "c.py").write_text("from . import a\n", encoding="utf-8")
    (package / "d.py").write_text("import bot.a\n", encoding="utf-8")
    graph = import_graph(tmp_path, ["bot"])
    assert graph["bot.d"] == {"bot.a"}
    assert import_circles(graph) == [["bot.a", "bot.b", "bot.c", "bot.a"]]


# ---------------------------------------------------------------- the whole store
#
# The store's ports are its roles (`bot.store_ports`: sessions, history, platform messages,
# search, chat events, claims); a consumer takes the roles it calls. The whole store (their
# union, or either implementation) is named only by the composition root, which opens it,
# hands it on under its role types, and closes it.

CONSUMER_PACKAGES = ("bot", "adapters")
WHOLE_STORE_NAMES = ("ConversationStore", "SqlStore", "InMemoryStore")


def whole_store_names(root: Path) -> list[str]:
    """Every module of `CONSUMER_PACKAGES` outside `bot/app` (and `bot/store_ports.py`,
    which declares it) that names the whole store, as a name or an import."""
    found = []
    for package in CONSUMER_PACKAGES:
        for path in python_files(root / package):
            relative = path.relative_to(root).as_posix()
            if relative.startswith("bot/app/") or relative == "bot/store_ports.py":
                continue
            tree = parsed(path)
            names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
            names |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
            names |= {
                a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names
            }
            found += [f"{relative} names {name}" for name in WHOLE_STORE_NAMES if name in names]
    return found


def test_nothing_outside_the_composition_root_names_the_whole_store() -> None:
    found = whole_store_names(ROOT)
    assert found == [], "\n".join(found)


def test_the_store_checker_sees_the_whole_store_named(tmp_path: Path) -> None:
    for where in ("bot/services", "bot/app", "adapters"):
        (tmp_path / where).mkdir(parents=True)
    (tmp_path / "bot/services/s.py").write_text(
        "from bot.store_ports import ConversationStore, HistoryStore\n", encoding="utf-8"
    )
    (tmp_path / "bot/app/w.py").write_text("from storage.sql import SqlStore\n", encoding="utf-8")
    (tmp_path / "adapters/a.py").write_text(
        "import testkit.memory_store\n\nstore = testkit.memory_store.InMemoryStore()\n",
        encoding="utf-8",
    )
    assert whole_store_names(tmp_path) == [
        "bot/services/s.py names ConversationStore",
        "adapters/a.py names InMemoryStore",
    ]

"""The dependency direction (docs/architecture.md, Layers): the core imports no I/O and no
outer layer, only the composition root (`bot/app`) reaches the adapters, the storage and the
settings, and no two modules import each other, directly or round a circle."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
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


# ---------------------------------------------------------------- ports as small as their use
#
# A port is as small as its consumer: every parameter or attribute typed with a store port
# (a Protocol whose methods the store implements) is called, directly or through what it is
# handed to, on every method of its port and on nothing else. Types are followed through
# `self.x = param`, dataclass fields, `x = self.y`, `x = Cls(...)` and attribute chains
# (`ctx.history.find_aliases`), which is how this code base passes its ports around.

CONSUMER_PACKAGES = ("bot", "adapters")
WHOLE_STORE = "bot.store_ports.ConversationStore"
"""The union of every store port: only the composition root (`bot/app`) takes it."""

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(slots=True)
class ParsedModule:
    name: str
    path: Path
    tree: ast.Module
    names: dict[str, str]
    """Local name → qualified name, of what the module defines or imports."""


@dataclass(slots=True)
class PortUse:
    """One parameter or attribute typed with a port, and what is done with it."""

    where: str
    port: str
    called: set[str] = field(default_factory=set)
    forwarded: set[str] = field(default_factory=set)
    """Methods of the ports of the parameters it is handed to."""
    unresolved: list[str] = field(default_factory=list)


def parse_modules(root: Path, packages: Iterable[str]) -> dict[str, ParsedModule]:
    modules: dict[str, ParsedModule] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            name = module_name(path, root)
            tree = parsed(path)
            names: dict[str, str] = {}
            for node in tree.body:
                if isinstance(node, ast.ClassDef | FunctionNode):
                    names[node.name] = f"{name}.{node.name}"
            package_parts = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom):
                    base = node.module or ""
                    if node.level:
                        here = package_parts[: len(package_parts) - node.level + 1]
                        base = ".".join([*here, base] if base else here)
                    for alias in node.names:
                        names.setdefault(alias.asname or alias.name, f"{base}.{alias.name}")
            modules[name] = ParsedModule(name=name, path=path, tree=tree, names=names)
    return modules


def is_protocol(node: ast.ClassDef) -> bool:
    return any(
        (isinstance(b, ast.Name) and b.id == "Protocol")
        or (isinstance(b, ast.Attribute) and b.attr == "Protocol")
        for b in node.bases
    )


def find_ports(modules: Mapping[str, ParsedModule]) -> dict[str, set[str]]:
    """Every Protocol class → the methods it declares or inherits from other Protocols."""
    declared: dict[str, tuple[set[str], list[str]]] = {}
    for module in modules.values():
        for node in module.tree.body:
            if isinstance(node, ast.ClassDef) and is_protocol(node):
                own = {item.name for item in node.body if isinstance(item, FunctionNode)}
                bases = [
                    module.names[b.id]
                    for b in node.bases
                    if isinstance(b, ast.Name) and b.id in module.names
                ]
                declared[f"{module.name}.{node.name}"] = (own, bases)

    def methods(qualname: str) -> set[str]:
        own, bases = declared[qualname]
        return own.union(*(methods(b) for b in bases if b in declared))

    return {qualname: methods(qualname) for qualname in declared}


def annotated_type(annotation: ast.expr | None, module: ParsedModule) -> str | None:
    """The class an annotation names (`C`, `C | None`, `Optional[C]`), qualified."""
    if annotation is None:
        return None
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return annotated_type(annotation.left, module) or annotated_type(annotation.right, module)
    if isinstance(annotation, ast.Subscript) and isinstance(annotation.value, ast.Name):
        if annotation.value.id == "Optional":
            return annotated_type(annotation.slice, module)
        return None
    if isinstance(annotation, ast.Name):
        return module.names.get(annotation.id)
    return None


def parameters(node: FunctionNode, module: ParsedModule) -> list[tuple[str, str | None]]:
    args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
    return [
        (a.arg, annotated_type(a.annotation, module)) for a in args if a.arg not in ("self", "cls")
    ]


@dataclass(slots=True)
class ClassInfo:
    qualname: str
    node: ast.ClassDef
    module: ParsedModule
    attributes: dict[str, str] = field(default_factory=dict)
    """Attribute → its declared or assigned class."""


def class_infos(modules: Mapping[str, ParsedModule]) -> dict[str, ClassInfo]:
    classes: dict[str, ClassInfo] = {}
    for module in modules.values():
        for node in module.tree.body:
            if not isinstance(node, ast.ClassDef) or is_protocol(node):
                continue
            info = ClassInfo(qualname=f"{module.name}.{node.name}", node=node, module=module)
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    found = annotated_type(item.annotation, module)
                    if found is not None:
                        info.attributes[item.target.id] = found
            for method in node.body:
                if not isinstance(method, FunctionNode):
                    continue
                params = dict(parameters(method, module))
                for stmt in ast.walk(method):
                    target: ast.expr | None = None
                    found = None
                    if isinstance(stmt, ast.AnnAssign):
                        target, found = stmt.target, annotated_type(stmt.annotation, module)
                    elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                        target, value = stmt.targets[0], stmt.value
                        if isinstance(value, ast.BoolOp):  # `param or default`
                            value = value.values[0]
                        if isinstance(value, ast.Name):
                            found = params.get(value.id)
                        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
                            found = module.names.get(value.func.id)
                    if found is not None and target is not None and self_attribute(target):
                        assert isinstance(target, ast.Attribute)
                        info.attributes.setdefault(target.attr, found)
            classes[info.qualname] = info
    return classes


def self_attribute(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    )


def callee_parameters(
    modules: Mapping[str, ParsedModule], classes: Mapping[str, ClassInfo]
) -> dict[str, list[tuple[str, str | None]]]:
    """Module-level functions and classes (by `__init__`, else dataclass fields) → params."""
    callees: dict[str, list[tuple[str, str | None]]] = {}
    for module in modules.values():
        for node in module.tree.body:
            if isinstance(node, FunctionNode):
                callees[f"{module.name}.{node.name}"] = parameters(node, module)
    for qualname, info in classes.items():
        init = next(
            (i for i in info.node.body if isinstance(i, FunctionNode) and i.name == "__init__"),
            None,
        )
        for method in info.node.body:
            if isinstance(method, FunctionNode):
                callees[f"{qualname}.{method.name}"] = parameters(method, info.module)
        if init is not None:
            callees[qualname] = parameters(init, info.module)
        else:
            callees[qualname] = [
                (item.target.id, annotated_type(item.annotation, info.module))
                for item in info.node.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            ]
    return callees


def functions_of(tree: ast.Module) -> Iterator[tuple[ast.ClassDef | None, FunctionNode]]:
    for node in tree.body:
        if isinstance(node, FunctionNode):
            yield None, node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, FunctionNode):
                    yield node, item


@functools.cache
def port_uses(root: Path, packages: Iterable[str] = CONSUMER_PACKAGES) -> list[PortUse]:
    """Every parameter and attribute of `packages` typed with a port, with its use."""
    modules = parse_modules(root, packages)
    ports = find_ports(modules)
    classes = class_infos(modules)
    callees = callee_parameters(modules, classes)
    uses: dict[tuple[str, str], PortUse] = {}

    def use_of(owner: str, name: str, port: str, where: Path) -> PortUse:
        key = (owner, name)
        if key not in uses:
            label = f"{where.relative_to(root)} {owner.rpartition('.')[2]}.{name}"
            uses[key] = PortUse(where=label, port=port)
        return uses[key]

    for info in classes.values():
        for attr, kind in info.attributes.items():
            if kind in ports:
                use_of(info.qualname, attr, kind, info.module.path)

    for module in modules.values():
        for cls, function in functions_of(module.tree):
            owner_class = classes.get(f"{module.name}.{cls.name}") if cls else None
            owner = f"{module.name}.{(cls.name + '.') if cls else ''}{function.name}"
            # local name → (class, the PortUse it stands for, if a port)
            kept = {  # `self.x = param`: the parameter is the attribute
                stmt.value.id: stmt.targets[0].attr
                for stmt in ast.walk(function)
                if isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and self_attribute(stmt.targets[0])
                and isinstance(stmt.targets[0], ast.Attribute)
                and isinstance(stmt.value, ast.Name)
            }
            local: dict[str, tuple[str, PortUse | None]] = {}
            for name, kind in parameters(function, module):
                if kind is None:
                    continue
                port_use = None
                if kind in ports and owner_class is not None and name in kept:
                    port_use = uses.get((owner_class.qualname, kept[name]))
                if kind in ports and port_use is None:
                    port_use = use_of(owner, name, kind, module.path)
                local[name] = (kind, port_use)

            def type_of(
                node: ast.AST,
                local: dict[str, tuple[str, PortUse | None]] = local,
                owner_class: ClassInfo | None = owner_class,
            ) -> tuple[str, PortUse | None] | None:
                if isinstance(node, ast.Name):
                    return local.get(node.id)
                if isinstance(node, ast.Attribute):
                    if self_attribute(node) and owner_class is not None:
                        base: str | None = owner_class.qualname
                    else:
                        outer = type_of(node.value)
                        base = outer[0] if outer else None
                    holder = classes.get(base or "")
                    if holder is None or node.attr not in holder.attributes:
                        return None
                    kind = holder.attributes[node.attr]
                    port_use = uses.get((holder.qualname, node.attr)) if kind in ports else None
                    return kind, port_use
                return None

            for stmt in ast.walk(function):  # local aliases: `x = self.y`, `x = Cls(...)`
                if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                    target = stmt.targets[0]
                    if isinstance(target, ast.Name):
                        if isinstance(stmt.value, ast.Call) and isinstance(
                            stmt.value.func, ast.Name
                        ):
                            made = module.names.get(stmt.value.func.id)
                            if made in classes:
                                local[target.id] = (made, None)
                        elif (found := type_of(stmt.value)) is not None:
                            local[target.id] = found

            parents = {
                child: node for node in ast.walk(function) for child in ast.iter_child_nodes(node)
            }
            for node in ast.walk(function):
                if isinstance(getattr(node, "ctx", None), ast.Store):
                    continue
                found = type_of(node) if isinstance(node, ast.Name | ast.Attribute) else None
                if found is None or found[1] is None:
                    continue
                port_use = found[1]
                parent = parents.get(node)
                if isinstance(parent, ast.keyword):
                    parent = parents.get(parent)
                if isinstance(parent, ast.Attribute) and parent.value is node:
                    port_use.called.add(parent.attr)
                elif isinstance(parent, ast.Call) and parent.func is node:
                    port_use.called.add("__call__")
                elif isinstance(parent, ast.Call):
                    func = parent.func
                    if isinstance(func, ast.Name):
                        params = callees.get(module.names.get(func.id, ""))
                    elif isinstance(func, ast.Attribute) and self_attribute(func) and owner_class:
                        params = callees.get(f"{owner_class.qualname}.{func.attr}")
                    elif isinstance(func, ast.Attribute) and (holder := type_of(func.value)):
                        params = callees.get(f"{holder[0]}.{func.attr}")
                    else:
                        params = None
                    param: tuple[str, str | None] | None = None
                    if params is not None and node in parent.args:
                        index = parent.args.index(node)  # type: ignore[arg-type]
                        param = params[index] if index < len(params) else None
                    elif params is not None:
                        keyword = next(k.arg for k in parent.keywords if k.value is node)
                        param = next((p for p in params if p[0] == keyword), None)
                    if param is not None and param[1] in ports:
                        port_use.forwarded |= ports[param[1]]
                    else:
                        port_use.unresolved.append(
                            f"handed to {ast.unparse(func)}() on line {node.lineno}"
                        )
                elif isinstance(parent, ast.Compare | ast.BoolOp | ast.If):
                    continue  # a None check
                elif isinstance(parent, ast.Assign | ast.AnnAssign):
                    continue  # an alias or an attribute: traced through it
                else:
                    line = getattr(node, "lineno", 0)
                    port_use.unresolved.append(f"used as {type(parent).__name__} on line {line}")
    return list(uses.values())


def store_ports(ports: Mapping[str, set[str]]) -> set[str]:
    """The ports the store implements: every method one of the whole store's."""
    whole = ports[WHOLE_STORE]
    return {name for name, methods in ports.items() if methods and methods <= whole}


def port_problems(root: Path) -> list[str]:
    ports = find_ports(parse_modules(root, CONSUMER_PACKAGES))
    narrow = store_ports(ports) - {WHOLE_STORE}
    problems = []
    for use in port_uses(root):
        in_app = use.where.startswith("bot/app/")
        if use.port == WHOLE_STORE and not in_app:
            problems.append(f"{use.where} takes the whole store ({WHOLE_STORE})")
        elif use.port in narrow:
            unused = ports[use.port] - use.called - use.forwarded
            extra = use.called - ports[use.port]
            if unused:
                problems.append(f"{use.where}: {use.port} but never calls {sorted(unused)}")
            if extra:
                problems.append(f"{use.where}: calls {sorted(extra)}, not in {use.port}")
            problems += [f"{use.where}: {use.port} {u}" for u in use.unresolved]
    return problems


def test_every_store_port_is_as_small_as_its_consumer() -> None:
    """Each parameter or attribute typed with a store port calls every method of it (itself
    or through what it hands the port to), and only the composition root takes the whole
    store."""
    problems = port_problems(ROOT)
    assert problems == [], "\n".join(problems)


WHOLE_STORE_NAMES = ("ConversationStore", "SqlStore", "InMemoryStore")


def test_nothing_outside_the_composition_root_names_the_whole_store() -> None:
    found = []
    for package in CONSUMER_PACKAGES:
        for path in python_files(ROOT / package):
            relative = path.relative_to(ROOT).as_posix()
            if relative.startswith("bot/app/") or relative == "bot/store_ports.py":
                continue
            tree = parsed(path)
            names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
            names |= {
                a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names
            }
            found += [f"{relative} names {name}" for name in WHOLE_STORE_NAMES if name in names]
    assert found == [], "\n".join(found)


def test_every_port_is_taken_by_a_consumer() -> None:
    """A Protocol of `bot/ports.py` or `bot/store_ports.py` is the type of some consumer's
    parameter or attribute, or a part of one that is; else nobody needs it."""
    modules = parse_modules(ROOT, CONSUMER_PACKAGES)
    ports = find_ports(modules)
    taken = {use.port for use in port_uses(ROOT)}
    bases: dict[str, set[str]] = {}
    for module in modules.values():
        for node in module.tree.body:
            if isinstance(node, ast.ClassDef) and is_protocol(node):
                bases[f"{module.name}.{node.name}"] = {
                    module.names[b.id]
                    for b in node.bases
                    if isinstance(b, ast.Name) and b.id in module.names
                }
    needed = set()
    todo = list(taken)
    while todo:
        port = todo.pop()
        if port not in needed:
            needed.add(port)
            todo += bases.get(port, ())
    declared = {p for p in ports if p.startswith(("bot.ports.", "bot.store_ports."))}
    assert sorted(declared - needed) == []


PORTS_TOO_WIDE = """
from typing import Protocol


class Store(Protocol):
    async def read(self) -> int: ...

    async def write(self, value: int) -> None: ...


class Reader(Protocol):
    async def read(self) -> int: ...


class Service:
    def __init__(self, *, store: Store, reader: Reader) -> None:
        self.store = store
        self.reader = reader

    async def run(self) -> int:
        helper(self.reader)
        return await self.store.read()


def helper(reader: Reader) -> None:
    del reader
"""


def test_the_port_checker_sees_a_method_never_called(tmp_path: Path) -> None:
    package = tmp_path / "bot"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "service.py").write_text(PORTS_TOO_WIDE, encoding="utf-8")
    uses = {use.where: use for use in port_uses(tmp_path, ("bot",))}
    store = uses["bot/service.py Service.store"]
    assert store.called == {"read"}
    assert store.port == "bot.service.Store"
    # handed on to a function whose parameter is typed: its port counts, nothing is missed
    reader = uses["bot/service.py Service.reader"]
    assert reader.forwarded == {"read"}
    assert reader.unresolved == []
    assert uses["bot/service.py helper.reader"].called == set()

"""Writes the module map of docs/architecture.md ("Where each module lives") from the code.

Every package of the shipped tree, the test kit and the bench, each module with the first
sentence of its docstring. `python scripts/layout.py` rewrites the section in place;
`python scripts/layout.py --check` exits 1 when the page is out of date (the tests run it),
so the map can never go stale.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "architecture.md"
START = "<!-- module map: written by scripts/layout.py, do not edit by hand -->"
END = "<!-- end of module map -->"
PACKAGES = ("bot", "adapters", "storage", "testkit", "bench")


def first_sentence(path: Path) -> str:
    """The docstring's first sentence, on one line (empty when there is none)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    paragraph = " ".join(doc.split("\n\n", 1)[0].split())
    for end in (". ",):
        cut = paragraph.find(end)
        if cut > 0:
            paragraph = paragraph[: cut + 1]
            break
    return paragraph.rstrip(":")


def package_rows(package: Path) -> list[str]:
    rows = []
    for path in sorted(package.rglob("*.py")):
        if "__pycache__" in path.parts or "migrations" in path.parts:
            continue
        name = path.relative_to(ROOT).as_posix()
        if path.name == "__init__.py":
            summary = first_sentence(path)
            if not summary:
                continue
            name = path.parent.relative_to(ROOT).as_posix() + "/"
        else:
            summary = first_sentence(path)
        rows.append(f"| `{name}` | {summary.replace('|', '/')} |")
    return rows


def module_map() -> str:
    lines = [START, ""]
    for name in PACKAGES:
        package = ROOT / name
        if not package.is_dir():
            continue
        lines += [f"**{name}/**", "", "| module | what it is |", "|---|---|"]
        lines += package_rows(package)
        lines.append("")
    lines.append(END)
    return "\n".join(lines)


def rewrite(page: str) -> str:
    head, rest = page.split(START, 1)
    _, tail = rest.split(END, 1)
    return head + module_map() + tail


def main(argv: list[str]) -> int:
    page = PAGE.read_text(encoding="utf-8")
    fresh = rewrite(page)
    if "--check" in argv:
        if fresh != page:
            print("docs/architecture.md: the module map is out of date; run scripts/layout.py")
            return 1
        return 0
    PAGE.write_text(fresh, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

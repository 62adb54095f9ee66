"""Editing `bot.toml` and `.env` in place for `tgbot init`: a key is replaced where it stands
or added to its table, and everything else in the file (unknown keys, comments, order, blank
lines) is kept as it was written.

The TOML editor is line-based, not a full TOML writer: it knows `[table]` headers and
`key = value` lines (a value may be an array over several lines). Every edit is checked by
parsing the result with `tomllib`; a file it cannot edit safely (the key written as a dotted
key or an inline table, say) raises `ConfigError` and nothing is written.
"""

from __future__ import annotations

import fnmatch
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bot.errors import ConfigError

TomlValue = str | int | float | bool | list[int] | list[str]

_HEADER = re.compile(r"^\s*\[\[?\s*([^\[\]#\s](?:[^\[\]#]*[^\[\]#\s])?)\s*\]\]?\s*(#.*)?$")
"""A table header line. The name starts and ends with a non-space, so the spaces around it
are the outer `\\s*`'s alone: no backtracking between two ways of reading a long gap."""
_ENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=(.*)$")
_BARE = re.compile(r"[A-Za-z0-9_-]+")
_SHELL_SAFE = re.compile(r"[A-Za-z0-9_:./@+=,%-]*")


def toml_literal(value: TomlValue) -> str:
    """`value` written as TOML (strings with JSON-compatible escapes)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}"'
    return "[" + ", ".join(toml_literal(item) for item in value) + "]"


def table_name(*parts: str) -> str:
    """A dotted table name, quoting the parts that are not bare keys."""
    return ".".join(p if _BARE.fullmatch(p) else toml_literal(p) for p in parts)


def _normalise(header: str) -> str:
    try:
        parsed = tomllib.loads(f"[{header}]\n")
    except tomllib.TOMLDecodeError:
        return header.replace(" ", "")
    parts: list[str] = []
    node: Any = parsed
    while isinstance(node, dict) and len(node) == 1:
        key = next(iter(node))
        parts.append(key)
        node = node[key]
    return table_name(*parts)


def _value_end(lines: list[str], start: int) -> int:
    """The index after the last line of the `key = value` that starts at `start` (arrays
    may span lines: brackets are counted outside strings)."""
    depth = 0
    quote = ""
    for index in range(start, len(lines)):
        line = lines[index]
        body = line.split("=", 1)[1] if index == start else line
        escaped = False
        for char in body:
            if quote:
                if escaped:
                    escaped = False
                elif char == "\\" and quote == '"':
                    escaped = True
                elif char == quote:
                    quote = ""
            elif char in "\"'":
                quote = char
            elif char == "#":
                break
            elif char in "[{":
                depth += 1
            elif char in "]}":
                depth -= 1
        if depth <= 0:
            return index + 1
    return len(lines)


def _trailing_comment(line: str) -> str:
    """The ` # comment` after a one-line value, if any."""
    quote = ""
    escaped = False
    value = line.split("=", 1)[1] if "=" in line else ""
    for index, char in enumerate(value):
        if quote:
            if escaped:
                escaped = False
            elif char == "\\" and quote == '"':
                escaped = True
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == "#":
            return "  " + value[index:].rstrip("\n").strip()
    return ""


def _regions(lines: list[str]) -> list[tuple[str, int, int]]:
    """(table name, first line of its body, the line after it) in file order; the top level
    comes first, named ""."""
    regions: list[tuple[str, int, int]] = []
    current, start = "", 0
    for index, line in enumerate(lines):
        header = _HEADER.match(line)
        if header is not None:
            regions.append((current, start, index))
            current, start = _normalise(header[1]), index + 1
    regions.append((current, start, len(lines)))
    return regions


def set_toml_value(text: str, table: str, key: str, value: TomlValue, *, source: str) -> str:
    """`text` with `key` of `[table]` (`""`: the top level) set to `value`."""
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    key_line = re.compile(rf"^\s*(?:{re.escape(key)}|\"{re.escape(key)}\")\s*=")
    literal = f"{key} = {toml_literal(value)}"
    region = next((r for r in _regions(lines) if r[0] == table), None)
    if region is None:
        if lines and lines[-1].strip():
            lines.append("\n")
        lines.extend([f"[{table}]\n", literal + "\n"])
    else:
        _, start, end = region
        for index in range(start, end):
            if key_line.match(lines[index]):
                stop = _value_end(lines, index)
                comment = _trailing_comment(lines[index]) if stop == index + 1 else ""
                indent = lines[index][: len(lines[index]) - len(lines[index].lstrip())]
                lines[index:stop] = [f"{indent}{literal}{comment}\n"]
                break
        else:
            # after the table's last key, so the comments and blank lines below it stay put
            at = start
            index = start
            while index < end:
                stripped = lines[index].strip()
                if stripped and not stripped.startswith("#"):
                    at = _value_end(lines, index) if "=" in stripped else index + 1
                    index = at
                else:
                    index += 1
            lines.insert(at, literal + "\n")
    result = "".join(lines)
    _check_edit(result, table, key, value, source)
    return result


def _check_edit(text: str, table: str, key: str, value: TomlValue, source: str) -> None:
    where = f"{table}.{key}" if table else key
    try:
        parsed: Any = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            where, f"cannot edit it in place ({exc}); edit it by hand", source=source
        ) from None
    node = _walk(parsed, tomllib.loads(f"[{table}]\n")) if table else parsed
    if not isinstance(node, dict) or node.get(key) != value:
        raise ConfigError(where, "cannot edit it in place; edit it by hand", source=source)


def _walk(data: Any, shape: Mapping[str, Any]) -> Any:
    node = data
    level: Any = shape
    while isinstance(level, dict) and level:
        name = next(iter(level))
        if not isinstance(node, dict) or name not in node:
            return None
        node = node[name]
        level = level[name]
    return node


def read_toml(path: Path) -> tuple[str, dict[str, Any]]:
    """The file's text and its parsed content ("" and {} when it does not exist yet)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return "", {}
    except OSError as exc:
        raise ConfigError("--config", f"cannot read {path}: {exc.strerror}") from None
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("--config", f"{path}: not valid TOML: {exc}") from None


# ---------------------------------------------------------------- .env


def read_env(text: str) -> dict[str, str]:
    """`KEY=value` lines (optionally `export`, single or double quoted)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        found = _ENV_LINE.match(line)
        if found is None or line.lstrip().startswith("#"):
            continue
        raw = found[2].strip()
        if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
            raw = raw[1:-1]
        values[found[1]] = raw
    return values


def env_literal(value: str) -> str:
    """Quoted only when needed; the same text reads back from a shell `.` and from systemd's
    `EnvironmentFile=`."""
    if _SHELL_SAFE.fullmatch(value):
        return value
    if "'" in value:
        raise ConfigError("--env-file", "a value with a single quote cannot be written safely")
    return f"'{value}'"


def set_env_values(text: str, values: Mapping[str, str]) -> str:
    """`text` with each of `values` replaced where it stands or appended."""
    lines = text.splitlines()
    pending = dict(values)
    for index, line in enumerate(lines):
        found = _ENV_LINE.match(line)
        if found is None or line.lstrip().startswith("#") or found[1] not in pending:
            continue
        export = "export " if line.lstrip().startswith("export") else ""
        lines[index] = f"{export}{found[1]}={env_literal(pending.pop(found[1]))}"
    lines.extend(f"{name}={env_literal(value)}" for name, value in pending.items())
    return "\n".join(lines) + "\n"


def write_private(path: Path, text: str) -> None:
    """Write `text` readable by its owner only (0600), also when the file existed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        os.fchmod(file.fileno(), 0o600)
        file.write(text)


def write_readable(path: Path, text: str) -> None:
    """Write `text` readable by every user (0644), also when the file existed, in directories
    any user can enter: `bot.toml` holds no secret, and a service running as its own user
    (systemd's `DynamicUser=yes`) reads it, whatever the umask `sudo tgbot init` ran under.
    Directories made here get 0755; existing ones are left as they are."""
    missing = [parent for parent in (path.parent, *path.parent.parents) if not parent.exists()]
    for directory in reversed(missing):
        directory.mkdir(exist_ok=True)
        directory.chmod(0o755)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        os.fchmod(file.fileno(), 0o644)
        file.write(text)


def git_checkout(path: Path) -> Path | None:
    """The top of the git checkout `path` would be written into, or None outside one."""
    for directory in path.absolute().parents:
        if (directory / ".git").exists():
            return directory
    return None


def ignored_by_git(top: Path, path: Path) -> bool:
    """Whether `top/.gitignore` names `path` (a file in the checkout at `top`), read the way
    git reads the common patterns: `name` anywhere, `/name` at the top, `dir/name` from the
    top, globs, and a later `!pattern` taking a file back. Other .gitignore files and git's
    own exclude lists are not read, so False means "not that this file knows of"."""
    try:
        lines = (top / ".gitignore").read_text(encoding="utf-8").splitlines()
    except OSError:
        return False
    relative = path.absolute().relative_to(top).as_posix()
    ignored = False
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("#") or line.endswith("/"):
            continue
        negate = line.startswith("!")
        pattern = line[1:] if negate else line
        anchored = "/" in pattern.rstrip("/")
        pattern = pattern.lstrip("/")
        target = relative if anchored else relative.rsplit("/", 1)[-1]
        if fnmatch.fnmatchcase(target, pattern):
            ignored = not negate
    return ignored

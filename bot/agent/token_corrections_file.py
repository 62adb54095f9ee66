"""The token corrections' file in DATA_DIR: read at start, replaced atomically after a change.

File: `<data dir>/token-corrections.json`, `{"version": 1, "routes": {"<provider>/<model>":
{"ratio": 0.83, "samples": 57}}}`, replaced atomically (write a temporary file, then
`os.replace`). A missing or unreadable file starts every route fresh; it is never fatal.
The book it keeps is `bot.agent.metering.TokenTruth`.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path

from bot.context.tokens import TokenCorrection, corrections_from_dict, corrections_to_dict

log = logging.getLogger("tgbot.runtime")

FILE_NAME = "token-corrections.json"
VERSION = 1


def read_corrections(path: Path) -> dict[str, TokenCorrection]:
    """The routes saved at `path` (none when there is no file or it is unreadable)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("token corrections: %s unreadable (%s); starting fresh", path, exc)
        return {}
    routes = raw.get("routes") if isinstance(raw, dict) else None
    if not isinstance(routes, dict):
        log.warning("token corrections: %s has no routes; starting fresh", path)
        return {}
    return corrections_from_dict(routes)


def write_corrections(path: Path, routes: Mapping[str, TokenCorrection]) -> None:
    """Replace the file at `path` with `routes`; a failure is logged, never raised."""
    data = {"version": VERSION, "routes": corrections_to_dict(routes)}
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(temporary, path)
    except OSError as exc:  # a full disk must not fail a member's turn
        log.warning("token corrections: could not write %s (%s)", path, exc)

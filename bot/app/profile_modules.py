"""Which project functions one stretch of `tgbot run` calls: `TGBOT_PROFILE_MODULES=PATH`.

Off unless that variable is set; then `install` runs once, before the event loop and any
thread starts, and nothing is recorded until SIGUSR1. SIGUSR1 starts recording and writes
`{"state": "recording"}` to PATH; SIGUSR2 stops and writes `{"state": "done", "functions":
[[module, qualname, line], ...], "calls": [[caller, callee], ...]}`. A module is a file
under `bot/`, `adapters/` or `storage/`, by its path from the checkout (`bot/app/serve.py`);
a function is one code object of such a file that was entered (comprehensions and module
bodies not counted); a call is a pair of different modules where the callee was entered
with the caller the nearest project frame beneath it in the same task or thread (frames of
aiogram, SQLAlchemy... in between are looked through; a task or thread boundary is not).
`bench.mention_modules` drives it around one group mention.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

_ROOT = Path(__file__).resolve().parents[2]
_PACKAGES = ("bot", "adapters", "storage")
_SKIPPED = frozenset({"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>", "<module>"})
_BOUNDARIES = (
    str(Path(asyncio.__file__).parent),  # a task step: what awaits it is not beneath it
    str(Path(concurrent.futures.__file__).parent),
    threading.__file__,
)
_SELF = __file__


class _Recorder:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.on = False
        self.functions: set[tuple[str, str, int]] = set()
        self.calls: set[tuple[str, str]] = set()
        self._modules: dict[str, str | None] = {}

    def module(self, filename: str) -> str | None:
        try:
            return self._modules[filename]
        except KeyError:
            pass
        found: str | None = None
        if filename != _SELF and filename.endswith(".py"):
            relative = Path(filename).resolve()
            if relative.is_relative_to(_ROOT):
                name = relative.relative_to(_ROOT).as_posix()
                if name.split("/", 1)[0] in _PACKAGES:
                    found = name
        self._modules[filename] = found
        return found

    def hook(self, frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call" or not self.on:
            return
        code = frame.f_code
        callee = self.module(code.co_filename)
        if callee is None or code.co_name in _SKIPPED:
            return
        self.functions.add((callee, code.co_qualname, code.co_firstlineno))
        below = frame.f_back
        while below is not None:
            filename = below.f_code.co_filename
            caller = self.module(filename)
            if caller is not None:
                if caller != callee:
                    self.calls.add((caller, callee))
                return
            if filename.startswith(_BOUNDARIES):
                return
            below = below.f_back

    def start(self, *_: object) -> None:
        self.functions.clear()
        self.calls.clear()
        self.on = True
        sys.setprofile(self.hook)
        self._write({"state": "recording"})

    def stop(self, *_: object) -> None:
        sys.setprofile(None)
        self.on = False
        self._write(
            {
                "state": "done",
                "functions": sorted(self.functions),
                "calls": sorted(self.calls),
            }
        )

    def _write(self, report: dict[str, Any]) -> None:
        partial = self.path.with_name(self.path.name + ".partial")
        partial.write_text(json.dumps(report), encoding="utf-8")
        os.replace(partial, self.path)  # the reader never sees half a file


def install(path: str) -> None:
    """Arm the signals; threads started from now on carry the (idle) hook too."""
    recorder = _Recorder(Path(path))
    threading.setprofile(recorder.hook)
    signal.signal(signal.SIGUSR1, recorder.start)
    signal.signal(signal.SIGUSR2, recorder.stop)

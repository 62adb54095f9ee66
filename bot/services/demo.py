"""`tgbot demo`: the offline end-to-end showcase."""

from __future__ import annotations

from pathlib import Path

from bot.config import Settings


async def run_demo(settings: Settings, *, data_dir: Path | None) -> int:
    print("tgbot demo: not built yet. It will replay a scripted group and owner chat offline,")
    print("against a fake Bot API on 127.0.0.1 and the offline model.")
    return 0

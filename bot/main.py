"""The composition root: reads the settings once and wires adapters, storage and services."""

from __future__ import annotations

from pathlib import Path

from bot.config import Settings, load_settings
from bot.errors import NotBuiltError


def _settings(config: str | Path | None) -> Settings:
    return load_settings(config)


async def run(config: str | None, *, webhook: bool, host: str, port: int) -> int:
    _settings(config)
    raise NotBuiltError("`tgbot run` is not built yet (issue: agent runtime)")


async def demo(config: str | None, *, data_dir: str | None) -> int:
    _settings(config)
    print("tgbot demo: not built yet. It will replay a scripted group and owner chat offline,")
    print("against a fake Bot API on 127.0.0.1 and the offline model, and compare token usage")
    print("with a naive history baseline.")
    return 0


def usage_report(
    config: str | None, *, days: int, since: str | None, as_json: bool, chat: int | None
) -> int:
    _settings(config)
    raise NotBuiltError("`tgbot usage report` is not built yet (issue: usage report)")


async def context_show(config: str | None, *, chat_id: int, thread_id: int) -> int:
    _settings(config)
    raise NotBuiltError("`tgbot context show` is not built yet (issue: agent runtime)")


async def import_legacy(config: str | None, file: str) -> int:
    _settings(config)
    raise NotBuiltError("`tgbot import-legacy` is not built yet (issue: storage)")


async def db_upgrade(config: str | None) -> int:
    _settings(config)
    raise NotBuiltError("`tgbot db upgrade` is not built yet (issue: storage)")

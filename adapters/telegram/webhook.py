"""Webhook mode for `tgbot run --webhook` (several workers behind a load balancer)."""

from __future__ import annotations

from aiogram import Bot, Dispatcher

from bot.errors import NotBuiltError


async def serve_webhook(dispatcher: Dispatcher, bot: Bot, *, host: str, port: int) -> None:
    raise NotBuiltError("webhook mode is not built yet; run without --webhook")

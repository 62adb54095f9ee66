"""Telegram through aiogram: update parsing, routers and the outbound sender."""

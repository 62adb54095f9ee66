"""The end-to-end tests that run `tgbot run` start it through one fixture, `bot_running`
(tests/bot_process.py)."""

from tests.bot_process import bot_running

__all__ = ["bot_running"]

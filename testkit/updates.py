"""Raw Bot API update dicts read as the bot reads them, for the tests' update corpus."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from aiogram.types import Update

from adapters.telegram.lenient import lenient_update
from adapters.telegram.parsing import parse_update_strict
from adapters.telegram.text_units import Locale
from bot.domain.facts import InboundMessage

logger = logging.getLogger(__name__)


def parse_raw_update(
    data: Mapping[str, Any], *, bot_id: int, bot_username: str | None, locale: Locale
) -> InboundMessage | None:
    """`parse_update` for a raw Bot API update dict, read leniently when it does not
    validate (`lenient.lenient_update`, as the bot reads it); shapes that cannot be
    repaired give `None`."""
    try:
        update = Update.model_validate(dict(data))
    except Exception:
        lenient = lenient_update(dict(data))
        if lenient is None:
            logger.warning("invalid update %s", data.get("update_id"), exc_info=True)
            return None
        update = lenient
    return parse_update(update, bot_id=bot_id, bot_username=bot_username, locale=locale)


def parse_update(
    update: Update, *, bot_id: int, bot_username: str | None, locale: Locale
) -> InboundMessage | None:
    """The message an update carries, or `None` for updates we ignore or cannot read: an
    error inside becomes `None` and a logged warning (a corpus test reads every file)."""
    try:
        return parse_update_strict(update, bot_id=bot_id, bot_username=bot_username, locale=locale)
    except Exception:
        logger.warning("could not parse update %s", update.update_id, exc_info=True)
        return None

"""Updates that do not validate: a short reason why (`invalid_reason`), logged and told to
the skip hook (`report_skipped`) when one is passed unhandled.

Long polling (`adapters.telegram.polling_loop`) and the webhook (`adapters.telegram.webhook`)
both skip such an update rather than stall on it; an update read leniently instead
(`adapters.telegram.lenient`) is logged with its reason too.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from pydantic import ValidationError

logger = logging.getLogger(__name__)

SkipHook = Callable[[int, str], Awaitable[None]]
"""Called with (update_id, reason) for an update that was passed without being handled."""


def invalid_reason(exc: ValidationError) -> str:
    """A short, loggable reason: the first failing fields and what was wrong."""
    parts = []
    for error in exc.errors(include_url=False, include_input=False)[:3]:
        where = ".".join(str(part) for part in error.get("loc", ()))
        parts.append(f"{where}: {error.get('msg', '')}")
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


async def report_skipped(hook: SkipHook | None, update_id: int | None, reason: str) -> None:
    """Log an update passed unhandled and tell `hook` (its failure is logged, not raised)."""
    logger.warning("skipping update %s that does not validate: %s", update_id, reason)
    if hook is None or update_id is None:
        return
    try:
        await hook(update_id, reason)
    except Exception:
        logger.exception("recording skipped update %s failed", update_id)

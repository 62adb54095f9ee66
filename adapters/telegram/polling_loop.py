"""Long polling that confirms an update only after it was handled, each chat in order.

aiogram's `start_polling` confirms a batch (the next `getUpdates` offset) as soon as it has
started a task per update, so a crash in the next milliseconds loses updates that were
never stored; and tasks of one chat race each other. Here a batch is handled first, then
confirmed by the next request:

- updates are grouped by chat; a chat's updates run one after the other, ordered by message
  id (then update id, so an edit follows its message) even when a batch lists them out of
  order; different chats run concurrently; changes to the bot's own membership run first
  (a bot kicked in this batch answers none of it: it could not send there anyway), and
  reactions go with the message they react to;
- a failing handler is logged and does not stop polling (the inbound service de-duplicates,
  so an update seen twice after a crash is stored once); `StorageUnavailable` (the
  database is busy or away) is retried with backoff before the update is given up;
- `getUpdates` failures back off exponentially up to `MAX_BACKOFF` seconds;
- on `stop`, the batch in hand finishes and is confirmed before returning.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

from aiogram import Bot, Dispatcher
from aiogram.types import Message, Update

from bot.errors import StorageUnavailable

logger = logging.getLogger(__name__)

MAX_BACKOFF = 30.0
STORAGE_RETRIES = 4


async def poll_updates(
    dispatcher: Dispatcher, bot: Bot, *, stop: asyncio.Event, poll_seconds: int = 30
) -> None:
    """Poll until `stop` is set."""
    allowed = dispatcher.resolve_used_update_types()
    request_timeout = int((bot.session.timeout or 60) + poll_seconds)
    offset: int | None = None
    backoff = 0.5
    while not stop.is_set():
        fetch = asyncio.ensure_future(
            bot.get_updates(
                offset=offset,
                timeout=poll_seconds,
                allowed_updates=allowed,
                request_timeout=request_timeout,
            )
        )
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait({fetch, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not fetch.done():
            fetch.cancel()
            with contextlib.suppress(BaseException):
                await fetch
            break
        try:
            updates = fetch.result()
        except Exception as exc:
            logger.error(
                "getUpdates failed (%s: %s); retrying in %.1fs", type(exc).__name__, exc, backoff
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), backoff)
            backoff = min(MAX_BACKOFF, backoff * 2)
            continue
        backoff = 0.5
        if not updates:
            continue
        await handle_batch(dispatcher, bot, updates)
        offset = max(update.update_id for update in updates) + 1
    if offset is not None:  # confirm the last batch, so a restart does not see it again
        with contextlib.suppress(Exception):
            await bot.get_updates(offset=offset, limit=1, timeout=0)


async def handle_batch(dispatcher: Dispatcher, bot: Bot, updates: Sequence[Update]) -> None:
    """Feed one batch: chats concurrently, each chat's updates in message order."""
    chats: dict[object, list[Update]] = {}
    for update in updates:
        chats.setdefault(_chat_key(update), []).append(update)

    async def run_chat(group: list[Update]) -> None:
        for update in sorted(group, key=_order_key):
            for attempt in range(STORAGE_RETRIES + 1):
                try:
                    await dispatcher.feed_update(bot, update)
                except StorageUnavailable:
                    if attempt == STORAGE_RETRIES:
                        logger.exception("storing update %s failed; giving up", update.update_id)
                    else:
                        await asyncio.sleep(0.5 * 2**attempt)
                        continue
                except Exception:
                    logger.exception("handling update %s failed", update.update_id)
                break

    await asyncio.gather(*(run_chat(group) for group in chats.values()))


def _message(update: Update) -> Message | None:
    return (
        update.message or update.edited_message or update.channel_post or update.edited_channel_post
    )


def _chat_key(update: Update) -> object:
    message = _message(update)
    chat = message.chat if message is not None else None
    if update.my_chat_member is not None:
        chat = update.my_chat_member.chat
    elif update.message_reaction is not None:
        chat = update.message_reaction.chat
    if chat is None:
        return ("update", update.update_id)
    return ("chat", chat.id)


def _order_key(update: Update) -> tuple[int, int, int]:
    """(phase, message id, update id): membership changes first, then messages, edits and
    reactions in message order."""
    message = _message(update)
    if message is not None:
        return (1, message.message_id, update.update_id)
    if update.message_reaction is not None:
        return (1, update.message_reaction.message_id, update.update_id)
    if update.my_chat_member is not None:
        return (0, 0, update.update_id)
    return (1, 0, update.update_id)

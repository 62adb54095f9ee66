"""Long polling that confirms an update only after it was handled, each chat in order; and
`handle_batch`, the one way every update is handled (a polled batch, one webhook update),
with the `BatchDelivery` that reads a batch's new messages and hands them on together.

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
  so an update seen twice after a crash is stored once); a transient error
  (`StorageUnavailable`: the database is busy or away; `OSError`: out of file handles, a
  disk or socket hiccup) is retried with backoff, and when it persists the update is left
  unconfirmed: the next `getUpdates` starts at it, so it is delivered again, never lost;
- `getUpdates` failures back off exponentially up to `MAX_BACKOFF` seconds; a `getUpdates`
  that hangs past its deadline (the long poll plus `grace_seconds`) is abandoned and asked
  again from the same offset, so nothing is lost; each one that completes is reported to
  `health` (`adapters.telegram.update_health`: `/healthz`, the systemd watchdog);
- the reply of `getUpdates` is read as raw JSON and validated update by update: one update
  aiogram cannot validate (an older or newer Bot API shape) is logged with its `update_id`
  and the reason, reported to `on_skipped` (the update log), and passed; the rest of the
  batch is handled and the offset moves past it; a membership update or a message is read
  leniently first (`lenient.lenient_update`), so added, removed and promoted are never
  lost, nor a post for one fact in an older shape;
- on `stop`, the batch in hand finishes and is confirmed before returning.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiogram import Bot, Dispatcher
from aiogram.methods import GetUpdates
from aiogram.methods.base import Response
from aiogram.types import Message, Update
from pydantic import ValidationError

from adapters.telegram.lenient import lenient_update
from adapters.telegram.parsing import parse_update_strict
from adapters.telegram.skipped_updates import SkipHook, invalid_reason, report_skipped
from adapters.telegram.text_units import Locale
from adapters.telegram.update_health import UpdateHealth
from bot.domain.facts import InboundMessage
from bot.errors import StorageUnavailable
from bot.retry import with_retries

logger = logging.getLogger(__name__)

MAX_BACKOFF = 30.0
FIRST_BACKOFF = 0.5
"""Seconds before `getUpdates` is asked again after it failed or left updates unconfirmed;
doubled each time, up to `MAX_BACKOFF`."""
STORAGE_RETRIES = 4
STORAGE_RETRY_DELAY = 0.5
"""Seconds before the first retry of a transient storage error; doubled each time."""
TRANSIENT = (StorageUnavailable, OSError)
"""Errors that say nothing about the update: it is retried, never skipped."""

AfterBatchHook = Callable[[], None]
"""Called after a batch was handled, before its offset is confirmed (fault injection)."""
ParseErrorHook = Callable[[Update, Exception], Awaitable[None]]
BatchHook = Callable[[Sequence[InboundMessage]], Awaitable[None]]

BATCH_DELIVERY = "tgbot_batch_delivery"
"""Where `app.build_dispatcher` keeps its sink's `BatchDelivery`."""


class GetRawUpdates(GetUpdates):
    """`getUpdates` whose result stays raw JSON objects: aiogram validates a reply as one
    model, so one update it cannot read would fail the whole call, again and again."""

    __returning__ = list[dict[str, Any]]


# pydantic keeps parametrised models only weakly (see adapters/telegram/app.py)
_RAW_RESPONSE = Response[list[dict[str, Any]]]


async def poll_updates(
    dispatcher: Dispatcher,
    bot: Bot,
    *,
    stop: asyncio.Event,
    poll_seconds: int = 30,
    on_skipped: SkipHook | None = None,
    after_batch: AfterBatchHook | None = None,
    health: UpdateHealth | None = None,
    grace_seconds: float = 15.0,
) -> None:
    """Poll until `stop` is set."""
    allowed = dispatcher.resolve_used_update_types()
    request_timeout = int((bot.session.timeout or 60) + poll_seconds)
    offset: int | None = None
    backoff = FIRST_BACKOFF
    while not stop.is_set():
        method = GetRawUpdates(offset=offset, timeout=poll_seconds, allowed_updates=allowed)
        fetch = asyncio.ensure_future(bot(method, request_timeout=request_timeout))
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait(
            {fetch, stopping},
            timeout=poll_seconds + grace_seconds,
            return_when=asyncio.FIRST_COMPLETED,
        )
        stopping.cancel()
        if not fetch.done():
            fetch.cancel()
            with contextlib.suppress(BaseException):
                await fetch
            if stop.is_set():
                break
            logger.error(
                "getUpdates did not complete within %gs; abandoned, asking again from offset %s",
                poll_seconds + grace_seconds,
                offset,
            )
            continue
        try:
            raw = fetch.result()
        except Exception as exc:
            logger.error(
                "getUpdates failed (%s: %s); retrying in %.1fs", type(exc).__name__, exc, backoff
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), backoff)
            backoff = min(MAX_BACKOFF, backoff * 2)
            continue
        backoff = FIRST_BACKOFF
        if health is not None:
            health.polled()
        if not raw:
            continue
        updates, skipped = validate_updates(raw, bot)
        for update_id, reason in skipped:
            await report_skipped(on_skipped, update_id, reason)
        unconfirmed = await handle_batch(dispatcher, bot, updates)
        if after_batch is not None:
            after_batch()
        ids = [u.update_id for u in updates] + [uid for uid, _ in skipped if uid is not None]
        if unconfirmed:
            offset = min(unconfirmed)
            logger.warning("updates from %s are not confirmed; fetching them again", offset)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), backoff)
            backoff = min(MAX_BACKOFF, backoff * 2)
        elif ids:
            offset = max(ids) + 1
    if offset is not None:  # confirm the last batch, so a restart does not see it again
        with contextlib.suppress(Exception):
            await bot(GetRawUpdates(offset=offset, limit=1, timeout=0))


def validate_updates(
    raw: Sequence[Any], bot: Bot
) -> tuple[list[Update], list[tuple[int | None, str]]]:
    """Validate a `getUpdates` result update by update: the valid ones, and (update_id,
    reason) of each one that is not (its id is None when even that is unreadable)."""
    updates: list[Update] = []
    skipped: list[tuple[int | None, str]] = []
    for item in raw:
        update_id = _update_id(item)
        try:
            updates.append(Update.model_validate(item, context={"bot": bot}))
        except ValidationError as exc:
            lenient = lenient_update(item, context={"bot": bot})
            if lenient is not None:
                logger.warning("update %s read leniently: %s", update_id, invalid_reason(exc))
                updates.append(lenient)
            else:
                skipped.append((update_id, invalid_reason(exc)))
    return updates, skipped


def _update_id(item: Any) -> int | None:
    if isinstance(item, dict):
        value = item.get("update_id")
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


async def handle_batch(dispatcher: Dispatcher, bot: Bot, updates: Sequence[Update]) -> set[int]:
    """Feed one batch (a `getUpdates` batch, or one webhook update): chats concurrently,
    each chat's updates in message order. Returns the ids of updates a transient error
    kept from being handled (not to be confirmed).

    Each chat's leading new messages go to the sink's `on_messages` together (the
    dispatcher's `BatchDelivery`), stored in one transaction; the rest of each chat (from
    its first edit or other update on) then goes through the dispatcher, in order."""
    unconfirmed: set[int] = set()
    chats: dict[object, list[Update]] = {}
    for update in updates:
        chats.setdefault(_chat_key(update), []).append(update)
    groups = [sorted(group, key=_order_key) for group in chats.values()]
    batch = batch_delivery(dispatcher)
    if batch is not None:
        heads: list[Update] = []
        rests: list[list[Update]] = []
        for group in groups:
            cut = next((i for i, u in enumerate(group) if not batch.takes(u)), len(group))
            heads += group[:cut]
            rests.append(group[cut:])
        delivered = await _deliver_batch(batch, heads) if heads else True
        if delivered is None:
            unconfirmed.update(u.update_id for u in heads)
            groups = rests
        elif delivered:
            groups = rests

    async def run_chat(group: list[Update]) -> None:
        for update in group:
            try:
                await _retry_transient(functools.partial(dispatcher.feed_update, bot, update))
            except TRANSIENT:
                logger.exception(
                    "handling update %s failed for a transient reason; it stays unconfirmed",
                    update.update_id,
                )
                unconfirmed.add(update.update_id)
                return  # the chat's later updates wait for it, in order
            except Exception:
                logger.exception("handling update %s failed", update.update_id)

    await asyncio.gather(*(run_chat(group) for group in groups if group))
    return unconfirmed


class UpdateReader:
    """The message one update carries, read for the bot: an update that cannot be read is
    logged, reported to `on_parse_error` and skipped."""

    def __init__(
        self,
        *,
        bot_id: int,
        bot_username: str | None,
        locale: Locale,
        on_parse_error: ParseErrorHook | None,
    ) -> None:
        self._bot_id = bot_id
        self._bot_username = bot_username
        self._locale = locale
        self._on_parse_error = on_parse_error

    async def parse(self, update: Update) -> InboundMessage | None:
        """The parsed message, or None (logged, reported to `on_parse_error`).

        Only an update that cannot be read is skipped: an `OSError` (out of file handles, a
        disk that hiccups) says nothing about the update, so it propagates and the update is
        not confirmed; it comes again."""
        try:
            return parse_update_strict(
                update, bot_id=self._bot_id, bot_username=self._bot_username, locale=self._locale
            )
        except OSError:
            raise
        except Exception as exc:
            logger.warning("skipping update %s: %s", update.update_id, exc, exc_info=True)
            if self._on_parse_error is not None:
                try:
                    await self._on_parse_error(update, exc)
                except Exception:
                    logger.exception("on_parse_error hook failed")
            return None


class BatchDelivery:
    """New messages of a batch (a `getUpdates` batch, one webhook update), parsed and handed
    to the sink's `on_messages` in one call (it stores them in one transaction);
    `handle_batch` sends everything else through the dispatcher. A message that does not
    parse is logged and skipped, as one by one."""

    def __init__(self, reader: UpdateReader, on_messages: BatchHook) -> None:
        self._reader = reader
        self._on_messages = on_messages

    @staticmethod
    def takes(update: Update) -> bool:
        """Whether the update is a new message or channel post (not an edit)."""
        return update.message is not None or update.channel_post is not None

    async def deliver(self, updates: Sequence[Update]) -> None:
        """Parse and hand on; `StorageUnavailable` propagates (nothing is confirmed)."""
        messages: list[InboundMessage] = []
        for update in updates:
            message = await self._reader.parse(update)
            if message is not None:
                messages.append(message)
        if messages:
            await self._on_messages(messages)


def batch_delivery(dispatcher: Dispatcher) -> BatchDelivery | None:
    """The dispatcher's `BatchDelivery` (None: not built by `app.build_dispatcher`)."""
    found = dispatcher.workflow_data.get(BATCH_DELIVERY)
    return found if isinstance(found, BatchDelivery) else None


async def _deliver_batch(batch: BatchDelivery, heads: list[Update]) -> bool | None:
    """Hand the new messages over together; False when that failed for a reason other than
    a transient one (a bug): then the caller feeds them one by one (duplicates are found
    there); None when a transient error persisted: they stay unconfirmed."""
    try:
        await _retry_transient(functools.partial(batch.deliver, heads))
    except TRANSIENT:
        ids = f"{heads[0].update_id}..{heads[-1].update_id}"
        logger.exception("storing updates %s failed; they stay unconfirmed", ids)
        return None
    except Exception:
        logger.exception("handling a batch failed; handling its updates one by one")
        return False
    return True


async def _retry_transient(attempt: Callable[[], Awaitable[object]]) -> None:
    """`attempt`, retried `STORAGE_RETRIES` times while it fails for a `TRANSIENT` reason."""
    await with_retries(
        attempt, retries=STORAGE_RETRIES, first_delay=STORAGE_RETRY_DELAY, transient=TRANSIENT
    )


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

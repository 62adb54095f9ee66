"""Turns a new message's merge window does not start: an edit's re-answer (`queue_edit`),
a turn run at once (`spawn_turn`: `/retry`, crash recovery), and the orphaned-turn scan's
lock (`try_turn_lock`).

Each runs as a task of the session's `TurnScheduler` (`track`, so `drain` waits for it),
under the same turn lock as a mention's turn; the merge window, the locks and running a
turn stay in `bot.services.turn_scheduler`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from bot.domain.facts import InboundMessage
from bot.ports import SessionInfo
from bot.services.inbound_rules import Trigger
from bot.services.turn_scheduler import TurnScheduler


def queue_edit(
    turns: TurnScheduler,
    session: SessionInfo,
    message: InboundMessage,
    reanswer: Callable[[InboundMessage], Awaitable[None]],
) -> None:
    """After the merge window, under the turn lock, call `reanswer` with the newest text
    of the edited message; edits arriving before then only replace that text."""
    state = turns.state(session.id)
    queued = message.message_id in state.edits
    state.edits[message.message_id] = message
    if queued:
        return

    async def later() -> None:
        if turns.merge_window_seconds > 0:
            await asyncio.sleep(turns.merge_window_seconds)
        async with turns.turn_lock(session):
            newest = state.edits.pop(message.message_id, None)
            if newest is not None:
                await reanswer(newest)

    turns.track(state, asyncio.create_task(later(), name=f"edit-{session.id}"))


def spawn_turn(
    turns: TurnScheduler,
    session: SessionInfo,
    *,
    reply_to: int | None,
    leaf: int | None = None,
    expect_leaf: int | None = None,
    before: Callable[[], Awaitable[None]] | None = None,
    trigger: Trigger | None = None,
) -> None:
    """Run a turn now (no merge window) as a task, under the session's locks; with
    `leaf`, on a new branch from that record (`/retry`); with `expect_leaf`, only if
    nothing was added to the conversation since (recovery: another worker may have
    answered in between); `before` runs first, under the lock (a group's `/retry` asks
    again at the end of the conversation)."""

    async def turn() -> None:
        async with turns.turn_lock(session):
            if before is not None:
                await before()
            if expect_leaf is not None:
                current = await turns.store.find_session(session.key)
                if current is None or current.active_leaf_id != expect_leaf:
                    return
            if leaf is not None:
                await turns.store.set_active_leaf(session.id, leaf)
            await turns.run(session, reply_to=reply_to, trigger=trigger)

    state = turns.state(session.id)
    turns.track(state, asyncio.create_task(turn(), name=f"turn-{session.id}"))


@asynccontextmanager
async def try_turn_lock(turns: TurnScheduler, session: SessionInfo) -> AsyncIterator[bool]:
    """The turn lock only if nothing of this session is scheduled or running here and
    no worker holds it, without waiting (the orphaned-turn scan); yields whether held."""
    state = turns.known(session.id)
    if state is not None and not state.idle:
        yield False
        return
    state = turns.state(session.id)
    async with state.lock:  # free: `idle` said so, and nothing awaited in between
        if turns.chat_lock is None:
            yield True
            return
        async with turns.chat_lock.try_hold(session.key, scope="turn") as held:
            yield held

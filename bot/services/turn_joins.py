"""Messages that wait their turn: `join_later`, and the chat's `"join"` lock held meanwhile.

A message that addresses the bot while another member's turn waits out its merge window
waits its turn: that turn starts at once, and the message joins the conversation after it
answered, followed by a turn of its own. So does whatever the chat gets meanwhile, here or
on another worker: the worker whose messages wait holds the chat's `"join"` lock, which the
store lock reports to the others (`TurnScheduler.storing`), so a chat's messages are stored
in Telegram's order across workers. The rest of the scheduling is
`bot.services.turn_scheduler`'s; a plain mention never waits here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from bot.domain.facts import InboundMessage
from bot.ports import SessionInfo
from bot.services.turn_scheduler import JoinHold, SessionTurns, TurnScheduler


async def join_later(
    turns: TurnScheduler,
    session: SessionInfo,
    message: InboundMessage,
    store: Callable[[], Awaitable[None]],
    *,
    answer: bool,
) -> None:
    """Store `message` (`store`, under the store locks) once the turns pending for other
    senders have answered, after the messages deferred before it and those waiting on
    other workers; then, if `answer`, give it a turn (`turns`). Called under the store
    locks, so the chat's `"join"` lock is taken (`_hold_join`) before another worker can
    store a later message."""
    state = turns.state(session.id)
    hold = await _hold_join(turns, session, state)
    previous = state.joining
    sender = message.sender.id
    state.deferred[sender] = state.deferred.get(sender, 0) + 1

    async def join() -> None:
        try:
            if previous is not None:
                await asyncio.wait([previous])
            if hold is not None:
                await hold.wait()  # another worker's waiting messages join first
            while (
                (pending := state.pending) is not None
                and pending.sender_id != sender
                and not pending.task.done()
            ):
                await asyncio.wait([pending.task])
            async with turns.storing(session):
                await store()
        finally:
            left = state.deferred.pop(sender, 1) - 1
            if left:
                state.deferred[sender] = left
        if answer:
            turns.schedule(session, message)

    task = asyncio.create_task(join(), name=f"join-{session.id}")
    state.joining = task

    def forget(finished: asyncio.Task[None]) -> None:
        if state.joining is finished:  # nothing waits to join here any more
            state.joining = None
            if state.join_hold is not None:
                state.join_hold.release.set()
                state.join_hold = None

    task.add_done_callback(forget)
    turns.track(state, task)


async def _hold_join(
    turns: TurnScheduler, session: SessionInfo, state: SessionTurns
) -> JoinHold | None:
    """The chat's `"join"` lock for this worker's waiting messages, kept until the last
    of them joined: taken before returning when no worker holds it; otherwise held (by a
    task) once the other worker's messages joined. None: no ChatLock is wired."""
    chat_lock = turns.chat_lock
    if chat_lock is None:
        return None
    if state.join_hold is not None:
        return state.join_hold
    hold = state.join_hold = JoinHold()
    tried = asyncio.Event()

    async def holding() -> None:
        try:
            async with chat_lock.try_hold(session.key, scope="join") as held:
                if held:
                    hold.granted.set()
                    tried.set()
                    await hold.release.wait()
                    return
            tried.set()
            async with chat_lock.hold(session.key, scope="join"):
                hold.granted.set()
                await hold.release.wait()
        finally:
            tried.set()

    hold.task = asyncio.create_task(holding(), name=f"join-lock-{session.id}")
    turns.track(state, hold.task)
    await tried.wait()
    return hold

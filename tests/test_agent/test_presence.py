"""`Presence.typing`: "typing…" shows once a turn has run its grace, never for a turn that
answers within it, and never after the turn ends."""

from __future__ import annotations

import asyncio

from bot.agent.reply import Presence
from tests.deadlines import EVENT, deadline

CHAT = -100777


class Actions:
    """A `ChatActions` that records each action and signals it."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, int]] = []
        self.arrived = asyncio.Event()

    async def send_typing(self, chat_id: int, *, thread_id: int = 0) -> None:
        self.sent.append((chat_id, thread_id))
        self.arrived.set()


async def test_a_turn_answered_within_the_grace_shows_no_typing() -> None:
    actions = Actions()
    presence = Presence(actions, grace=3600.0)
    async with presence.typing(CHAT, 5) as typing:
        assert typing is not None
        await asyncio.sleep(0)  # the turn does its work
        await typing.stop()
    await asyncio.sleep(0)
    assert actions.sent == []
    tasks = {task.get_name() for task in asyncio.all_tasks()}
    assert not any(name.startswith("typing:") for name in tasks)


async def test_a_turn_past_the_grace_shows_typing_in_its_thread_until_it_ends() -> None:
    actions = Actions()
    presence = Presence(actions, grace=0.01, renew=3600.0)
    async with presence.typing(CHAT, 5) as typing:
        await asyncio.wait_for(actions.arrived.wait(), deadline(EVENT))
        assert typing is not None
        await typing.stop()
    assert actions.sent == [(CHAT, 5)]


async def test_no_grace_types_at_once_and_a_cancelled_turn_stops_typing() -> None:
    actions = Actions()
    presence = Presence(actions, grace=0.0, renew=3600.0)
    try:
        async with presence.typing(CHAT) as typing:
            assert typing is not None
            await asyncio.wait_for(actions.arrived.wait(), deadline(EVENT))
            raise asyncio.CancelledError
    except asyncio.CancelledError:
        pass
    await asyncio.sleep(0)
    assert actions.sent == [(CHAT, 0)]
    assert not any(t.get_name().startswith("typing:") and not t.done() for t in asyncio.all_tasks())

"""Issue 24 item 1 through `tgbot run`: "typing…" in a group while a slow model thinks.

The scripted model holds its answer until the test releases it (an event, not a sleep).
The fake Bot API records when each call arrived: `sendChatAction(typing)` comes while the
model is held (after the turn's half-second grace), renewals are at most 5 s apart, and none
follows the reply."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from adapters.llm.scripted import Hold, Reply, ScriptedModel
from tests.bot_process import StartBot, reply_stored
from tests.deadlines import EVENT, deadline

pytestmark = pytest.mark.slow

GROUP = -1009876500124
ALICE = {"id": 1001, "first_name": "Alice"}


async def test_typing_shows_while_a_slow_model_thinks_and_never_after_the_reply(
    bot_running: StartBot,
) -> None:
    release = asyncio.Event()
    held = Hold(release, Reply("here is the answer"))
    model = ScriptedModel([held])
    api, _llm, _bot, store = await bot_running(model)
    api.push_update(api.user_message(GROUP, ALICE, "@test_bot think hard", chat_title="Team"))
    await asyncio.wait_for(held.arrived.wait(), deadline(EVENT))
    # held long enough for two renewals
    await api.wait_for_call("sendChatAction", 3, timeout=deadline(EVENT))
    release.set()
    await reply_stored(api, store, GROUP, 1)
    # a late action would arrive within its renewal interval: the next turn's start
    # is the witness that this one has ended (its action would have been recorded)
    api.push_update(api.user_message(GROUP, ALICE, "@test_bot thanks", chat_title="Team"))
    model.add(Reply("you are welcome"))
    await reply_stored(api, store, GROUP, 2)

    timeline = api.timed_calls("sendChatAction", "sendMessage")
    first_reply = next(i for i, (_, name, _) in enumerate(timeline) if name == "sendMessage")
    before = timeline[:first_reply]
    assert len(before) >= 3
    assert all(p["action"] == "typing" and p["chat_id"] == GROUP for _, _, p in before)
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(before)]
    assert max(gaps) <= 5.0, gaps
    # after the first reply: at most the second turn's typing (a quick answer shows none,
    # a slow machine may show it), then its reply; nothing after a reply
    after = [name for _, name, _ in timeline[first_reply + 1 :]]
    assert after[-1] == "sendMessage"
    assert all(name == "sendChatAction" for name in after[:-1])

"""Finding 28.8: a member's `/retry` re-ran the owner's last turn with the owner's rights (a
message was deleted again). `/retry` regenerates only the requester's own last turn, and
that turn's tools act with the requester's rights."""

from __future__ import annotations

from pathlib import Path

from adapters.llm.scripted import CallTool, Reply, ScriptedModel
from bot.texts import text
from tests.fakes import ALICE, BOB, OWNER, inbound
from tests.test_services.test_inbound import GROUP, make


async def test_a_member_cannot_retry_the_owners_turn(tmp_path: Path) -> None:
    model = ScriptedModel([CallTool("delete_message", {"message_id": "m1"}), Reply("Deleted.")])
    app, _store, messenger, clock = make(tmp_path, model)

    async def say(mid: int, sender: object, body: str, **extra: object) -> None:
        clock.advance(5)
        await app.inbound.on_message(
            inbound(message_id=mid, text=body, sender=sender, at=clock.now(), **extra)  # type: ignore[arg-type]
        )
        await app.inbound.drain()

    await say(1, BOB, "spam spam spam")
    await say(2, OWNER, "@Helper delete m1", mentions_bot=True)
    assert len(messenger.deleted) == 1
    calls = len(model.requests)

    await say(3, ALICE, "/retry", command="retry")
    assert len(model.requests) == calls  # the owner's turn was not run again
    assert len(messenger.deleted) == 1
    assert messenger.texts(GROUP)[-1] == text("en", "nothing_to_retry")


async def test_a_member_retries_their_own_turn_with_their_own_rights(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            Reply("Here is a joke."),
            CallTool("delete_message", {"message_id": "m1"}),
            Reply("I cannot delete that."),
        ]
    )
    app, _store, messenger, clock = make(tmp_path, model)

    async def say(mid: int, sender: object, body: str, **extra: object) -> None:
        clock.advance(5)
        await app.inbound.on_message(
            inbound(message_id=mid, text=body, sender=sender, at=clock.now(), **extra)  # type: ignore[arg-type]
        )
        await app.inbound.drain()

    await say(1, OWNER, "the owner's message")
    await say(2, ALICE, "@Helper tell me a joke", mentions_bot=True)
    await say(3, ALICE, "/retry", command="retry")
    assert len(model.requests) >= 2  # regenerated
    assert messenger.deleted == []  # Alice may not delete the owner's message
    tool = [m for m in model.requests[-1].messages if m.role == "tool"][-1]
    assert tool.content.startswith("error[")

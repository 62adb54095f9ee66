"""The turn loop end to end over fakes: in-memory store, scripted model, recording sender."""

from __future__ import annotations

from pathlib import Path

from adapters.llm.scripted import Reply, ScriptedModel
from bot.agent.ledger_read import read_entries
from bot.domain.ids import SessionKey
from bot.domain.records import UserRecord
from tests.fakes import BOB, RecordingMessenger
from tests.test_agent.rig import CHAT, make_app, say


async def test_a_mention_is_answered_and_stored_as_conversation_only(
    tmp_path: Path, messenger: RecordingMessenger
) -> None:
    model = ScriptedModel([Reply("Hi Alice!")])
    app, store, clock = make_app(tmp_path, model, messenger)
    await say(app, clock, 1, "hello everyone", sender=BOB)
    await say(app, clock, 2, "@Helper what's up?", mentions_bot=True)

    assert messenger.texts(CHAT) == ["Hi Alice!"]
    assert messenger.sent[0].reply_to == 2
    request = model.requests[0]
    assert request.messages[0].role == "system"
    current = request.messages[-1]
    assert current.content.startswith("[id:m2;user:Alice;user_id:1001;")
    assert "[Turn context]" in current.content
    assert "[Turn context]" not in request.messages[-2].content

    session = await store.find_session(SessionKey(chat_id=CHAT))
    assert session is not None
    path = await store.load_path(session.id)
    assert [r.kind for r in path] == ["user", "user", "assistant"]
    for record in path:
        if isinstance(record.body, UserRecord):
            assert "[Turn context]" not in record.body.text
    assert path[-1].message_ids == (messenger.sent[0].message_id,)

    scan = read_entries(tmp_path / "agent-traces")
    entries = list(scan)
    assert len(entries) == 1
    assert entries[0].est_current > 0
    assert entries[0].est_fixed > 0

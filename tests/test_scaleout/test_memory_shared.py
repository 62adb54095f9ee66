"""Memory facts on two workers of one PostgreSQL database: a fact kept on one worker is shown
on the other, only in its chat and only to its member; `/memory forget` on one worker leaves
no copy in the other's next request; a private fact never reaches the group on either."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from adapters.llm.scripted import CallTool, Reply, ScriptedModel, is_summary_request
from bot.app.wiring import App
from bot.domain.facts import Sender
from bot.ports import LLMRequest
from storage.engine import create_engine_for
from storage.sql import SqlStore
from tests.fakes import RecordingMessenger, inbound
from tests.rig import rig_settings, wire_app
from tests.test_scaleout.conftest import fresh_postgres

pytestmark = pytest.mark.postgres

GROUP = -100801
ALICE = Sender(id=1001, name="Alice")
BOB = Sender(id=1002, name="Bob")
AT = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


@pytest.fixture
async def workers(tmp_path: Path) -> AsyncIterator[tuple[list[App], ScriptedModel]]:
    url = await fresh_postgres()
    model = ScriptedModel()
    apps = [
        wire_app(
            rig_settings(tmp_path / f"w{n}", database_url=url),
            store=SqlStore(create_engine_for(url)),
            messenger=RecordingMessenger(next_id=10_000 * (n + 1)),
            model=model,
        )
        for n in range(2)
    ]
    try:
        yield apps, model
    finally:
        for app in apps:
            await app.inbound.drain()
            await app.routes.aclose()
            await app.store.close()


class Turns:
    def __init__(self, model: ScriptedModel) -> None:
        self.model = model
        self.next_id = 1

    async def say(
        self, app: App, sender: Sender, text: str, *, chat: int = GROUP
    ) -> LLMRequest | None:
        """`sender` writes in `chat` through `app`; the turn's first model request (None for
        a command)."""
        before = len(self.requests())
        private = chat == sender.id
        command = text[1:].split()[0] if text.startswith("/") else None
        await app.inbound.on_message(
            inbound(
                chat_id=chat, message_id=self.next_id, sender=sender, at=AT, command=command,
                text=text if private or command else f"@helper_bot {text}",
                mentions_bot=not private and command is None,
                chat_type="private" if private else "supergroup",
            )
        )  # fmt: skip
        self.next_id += 1
        await app.inbound.drain()
        if command is not None:
            return None
        return self.requests()[before]

    def requests(self) -> list[LLMRequest]:
        return [r for r in self.model.requests if not is_summary_request(r)]


def seen(request: LLMRequest | None) -> str:
    assert request is not None
    return request.messages[-1].content


async def test_facts_kept_on_one_worker_are_scoped_the_same_on_the_other(
    workers: tuple[list[App], ScriptedModel],
) -> None:
    (a, b), model = workers
    turns = Turns(model)
    model.add(CallTool("remember", {"fact": "GROUPFACT Alice leads demos"}), Reply("ok"))
    await turns.say(a, ALICE, "I lead the demos")
    model.add(CallTool("remember", {"fact": "PRIVATEFACT Alice is vegetarian"}), Reply("ok"))
    await turns.say(b, ALICE, "I eat no meat", chat=ALICE.id)

    on_b = await turns.say(b, ALICE, "what do I lead?")
    assert "[Memory]" in seen(on_b)
    assert "- f1: GROUPFACT Alice leads demos" in seen(on_b)
    assert "PRIVATEFACT" not in str(on_b)
    bobs = await turns.say(a, BOB, "and me?")
    assert "GROUPFACT" not in str(bobs)
    assert "[Memory]" not in seen(bobs)

    await turns.say(b, ALICE, "/memory forget f1")
    after = await turns.say(a, ALICE, "what do I lead now?")
    assert "GROUPFACT" not in str(after)
    private = await turns.say(a, ALICE, "and what do I eat?", chat=ALICE.id)
    assert "- f2: PRIVATEFACT Alice is vegetarian" in seen(private)

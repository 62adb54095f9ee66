"""Issue 50, items 9 and 11: a model whose window the operator did not declare, smaller than
the history the chat builds up. Every turn overflows first and recovers by cutting the
oldest turns; the cut is persisted (folded into the summary as far as a fold fits), so the
chat keeps answering turn after turn, and what the model is shown has no gap between the
summary and the window.

Through the app rig (in-memory store, scripted model behind a provider that refuses any
request larger than its window, as a real one answers 400).
"""

from __future__ import annotations

import re
from pathlib import Path

from adapters.llm.scripted import Fail, Reply, ScriptedModel, is_summary_request
from bot.context.compaction import SUMMARY_PREFIX
from bot.context.tokens import estimate_history_tokens
from bot.context.tool_schema_cost import estimate_tool_schema_tokens
from bot.domain.ids import SessionKey
from bot.errors import ContextOverflow, ProviderUnavailable
from bot.ports import LLMRequest, LLMResponse, TextSink
from testkit.memory_store import InMemoryStore
from tests.fakes import ALICE, BOB, OWNER, RecordingMessenger, SteppingClock
from tests.rig import rig_settings, wire_app
from tests.test_agent.rig import START, say

WINDOW = 3_000
NOTE = "the rollout plan for the billing service needs a second look at the database step "
ALIAS = re.compile(r"^\[id:m(\d+);", re.MULTILINE)


def size(request: LLMRequest) -> int:
    schemas = [tool.schema() for tool in request.tools]
    return estimate_history_tokens(request.messages) + estimate_tool_schema_tokens(schemas)


class SmallWindow:
    """A provider with a `WINDOW`-token window nobody declared: larger requests are refused
    as a context overflow naming the window and the request's size."""

    def __init__(self) -> None:
        self.model = ScriptedModel()
        self.refused = 0

    async def complete(
        self, request: LLMRequest, *, on_text: TextSink | None = None
    ) -> LLMResponse:
        needed = size(request)
        if needed > WINDOW:
            self.refused += 1
            raise ContextOverflow(
                f"maximum context length is {WINDOW} tokens, requested {needed}",
                limit=WINDOW,
                requested=needed,
            )
        return await self.model.complete(request, on_text=on_text)

    async def aclose(self) -> None:
        return None


def shown_range(request: LLMRequest) -> tuple[int | None, int]:
    """(the last alias the summary covers or None, the first alias the window shows)."""
    covered = None
    first = None
    for message in request.messages[1:]:
        if message.content.startswith(SUMMARY_PREFIX):
            title = message.content.split("\n", 1)[0]
            covered = int(title.rstrip("]").split("–")[1].removeprefix("m"))
            continue
        found = ALIAS.search(message.content)
        if found is not None:
            first = int(found.group(1))
            break
    assert first is not None, request.messages
    return covered, first


async def test_a_chat_on_a_small_undeclared_window_answers_every_turn(
    tmp_path: Path, messenger: RecordingMessenger
) -> None:
    provider = SmallWindow()
    settings = rig_settings(tmp_path, owner_id=42)
    clock = SteppingClock(START)
    store = InMemoryStore()
    app = wire_app(settings, store=store, messenger=messenger, model=provider, clock=clock)  # type: ignore[arg-type]
    turns = 40
    starts = []
    for n in range(1, turns + 1):
        text = f"note {n}: {NOTE * 10}"
        await say(app, clock, n * 2, text, sender=OWNER, chat_type="private", chat_id=42)
        session = await store.find_session(SessionKey(chat_id=42))
        assert session is not None
        loaded = await store.load_history(session.id, max_records=400)
        starts.append(loaded.records[0].id)
    answered = [m for m in messenger.sent if m.text.startswith("Noted: note")]
    assert len(answered) == turns, [m.text[:40] for m in messenger.sent[-3:]]
    assert provider.refused, "no request overflowed: the test proves nothing"
    # a start once moved stays: it never moves backwards
    assert starts == sorted(starts)
    assert starts[-1] != starts[0]
    # every reply request shows the summary's range and the window without a gap
    replies = [r for r in provider.model.requests if not is_summary_request(r)]
    for request in replies:
        covered, first = shown_range(request)
        if covered is not None:
            assert first == covered + 1, (covered, first)


async def test_a_failed_fold_leaves_no_gap_between_the_summary_and_the_window(
    tmp_path: Path, messenger: RecordingMessenger
) -> None:
    """Item 11: the first move folds, every later summary call fails. The replies show the
    last good summary right before the window (the move waits), never a summary of m1–m31
    followed by m48."""
    failing = [Fail(ProviderUnavailable("summary route down"))] * 20
    model = ScriptedModel(summaries=[Reply("the plan so far"), *failing])
    settings = rig_settings(
        tmp_path,
        owner_id=42,
        history={"group_tokens": 8_000, "group": {"max_recent_messages": 40}},
        compaction={"group_tokens": 300},
    )
    clock = SteppingClock(START)
    app = wire_app(settings, store=InMemoryStore(), messenger=messenger, model=model, clock=clock)
    mid = 1
    for _ in range(3):
        for _ in range(30):
            await say(app, clock, mid, f"short note {mid}", sender=(ALICE, BOB)[mid % 2])
            mid += 1
        await say(app, clock, mid, "@Helper where are we?", mentions_bot=True)
        mid += 1
    replies = [r for r in model.requests if not is_summary_request(r)]
    assert len(replies) == 3
    assert any(m.content.startswith(SUMMARY_PREFIX) for m in replies[-1].messages)
    for request in replies:
        covered, first = shown_range(request)
        if covered is not None:
            assert first == covered + 1, (covered, first)

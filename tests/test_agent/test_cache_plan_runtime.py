"""The cache plan through the real runtime: never a breakpoint on the current message.

Every request the scripted model received (turn calls, tool-loop calls, the final call at
the iteration cap, summary calls) carries a plan; no point of it lands on the message with
the per-turn blocks (a summary request's instruction); a read point is a prefix an earlier
request of the chat really marked; a point the next request repeats is read by it.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.llm.scripted import CallTool, Reply, ScriptedModel, Step, is_summary_request
from bot.domain.messages import ChatMessage
from bot.ports import LLMRequest
from testkit.memory_store import InMemoryStore
from tests.fakes import ALICE, BOB, CHEN, RecordingMessenger, SteppingClock, inbound
from tests.rig import rig_settings, wire_app
from tests.test_agent.rig import START

TURN_MARK = "[Turn context]"
CHAT = -100500

# one event: (addressed, tool steps before the reply, minutes since the previous message)
EVENT = st.tuples(st.booleans(), st.integers(0, 3), st.integers(0, 8))


def _key(message: ChatMessage) -> tuple[object, ...]:
    return (message.role, message.content, message.tool_calls, message.tool_call_id)


def _prefix(request: LLMRequest, upto: int) -> list[tuple[object, ...]]:
    return [_key(m) for m in request.messages[: upto + 1]]


def current_of(request: LLMRequest) -> int:
    """The message a next turn does not repeat: the one with the per-turn blocks (a
    summary request's instruction)."""
    if is_summary_request(request):
        return len(request.messages) - 1
    found = [
        i for i, m in enumerate(request.messages) if m.role != "system" and TURN_MARK in m.content
    ]
    assert len(found) == 1, "exactly one message carries the per-turn blocks"
    return found[0]


async def drive(
    data_dir: Path, events: Sequence[tuple[bool, int, int]], *, iterations: int = 2
) -> list[LLMRequest]:
    model = ScriptedModel()
    messenger = RecordingMessenger()
    clock = SteppingClock(START)
    settings_ = rig_settings(
        data_dir,
        owner_id=42,
        history={"group_tokens": 8_000, "group": {"max_recent_messages": 12}},
        compaction={"group_tokens": 300},
        runtime={"max_tool_iterations": iterations},
    )
    app = wire_app(settings_, store=InMemoryStore(), messenger=messenger, model=model, clock=clock)
    try:
        for mid, (addressed, tools, minutes) in enumerate(events, start=1):
            clock.current += timedelta(minutes=minutes, seconds=5)
            if addressed:
                # the tool steps the cap lets run, then the answer (the final call's at the cap)
                steps: list[Step] = [
                    CallTool("lookup", {"n": i}) for i in range(min(tools, iterations))
                ]
                model.add(*steps, Reply(f"answer {mid}"))
            sender = (ALICE, BOB, CHEN)[mid % 3]
            text = f"message {mid} " + "words " * (mid % 7)
            await app.inbound.on_message(
                inbound(
                    message_id=mid, text=text, at=clock.now(), sender=sender, mentions_bot=addressed
                )
            )
            await app.inbound.drain()
            if app.runner.compactor is not None:
                await app.runner.compactor.drain()
            assert model.remaining == 0, "the turn used its whole script"
    finally:
        await app.runner.aclose()
        await app.routes.aclose()
    return list(model.requests)


def check_plans(requests: Sequence[LLMRequest]) -> None:
    keys = {r.cache_plan.session_key for r in requests if r.cache_plan is not None}
    assert len(keys) <= 1, "one cache key per chat session"
    for number, request in enumerate(requests):
        plan = request.cache_plan
        assert plan is not None, f"request {number} has no cache plan"
        assert plan.session_key
        current = current_of(request)
        points = plan.points()
        assert current not in points, f"request {number}: a breakpoint on the current message"
        assert all(0 <= p < len(request.messages) for p in points)
        for point in points:
            message = request.messages[point]
            assert message.role == "system" or TURN_MARK not in message.content
        if plan.previous_read is not None:
            read = plan.previous_read
            written = [
                earlier
                for earlier in requests[:number]
                if earlier.cache_plan is not None
                and read in earlier.cache_plan.points()
                and _prefix(earlier, read) == _prefix(request, read)
            ]
            assert written, f"request {number} reads at {read}, where no earlier one wrote"
        if number + 1 < len(requests) and plan.last_stable is not None:
            after = requests[number + 1]
            stable = plan.last_stable
            next_plan = after.cache_plan
            assert next_plan is not None
            if _prefix(after, stable) == _prefix(request, stable):
                assert next_plan.previous_read is not None
                assert next_plan.previous_read >= stable, f"request {number + 1} reads less"


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(events=st.lists(EVENT, min_size=1, max_size=24), iterations=st.integers(1, 3))
def test_no_breakpoint_ever_lands_on_the_current_message(
    events: list[tuple[bool, int, int]], iterations: int
) -> None:
    with tempfile.TemporaryDirectory(prefix="tgbot-cache-plan-") as tmp:
        requests = asyncio.run(drive(Path(tmp), events, iterations=iterations))
    assert len(requests) >= sum(1 for addressed, _, _ in events if addressed)
    check_plans(requests)


async def test_a_tool_loop_reads_what_the_iteration_before_wrote(tmp_path: Path) -> None:
    events = [(False, 0, 1), (True, 0, 1), (False, 0, 1), (True, 2, 1), (True, 0, 1)]
    requests = await drive(tmp_path, events, iterations=5)
    turns = [r for r in requests if not is_summary_request(r)]
    assert len(turns) == 1 + 3 + 1
    first, loop1, loop2, loop3, last = turns
    # the first turn: system prompt, and the message before the current one
    c = current_of(first)
    assert first.cache_plan is not None
    assert (first.cache_plan.system_end, first.cache_plan.last_stable) == (0, c - 1)
    assert first.cache_plan.previous_read is None
    # the turn with two tool steps: it reads the first turn's point, then each iteration
    # marks its last tool result and the next one reads it
    c = current_of(loop1)
    assert loop1.cache_plan is not None
    assert loop2.cache_plan is not None
    assert loop1.cache_plan.previous_read == current_of(first) - 1
    assert loop1.cache_plan.last_stable == c - 1
    assert loop2.messages[-1].role == "tool"
    assert loop2.cache_plan.previous_read == c - 1
    assert loop2.cache_plan.last_stable == len(loop2.messages) - 1
    assert loop3.cache_plan is not None
    assert loop3.cache_plan.previous_read == len(loop2.messages) - 1
    # the next turn reads where the previous turn ended its stable prefix, not the tool loop
    assert last.cache_plan is not None
    assert last.cache_plan.previous_read == c - 1
    assert last.cache_plan.last_stable == current_of(last) - 1
    check_plans(requests)

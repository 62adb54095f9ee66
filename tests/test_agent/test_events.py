"""The runtime's event bus: each event reaches the subscribers of its type, and a failing
subscriber neither stops the others nor the turn."""

from __future__ import annotations

from bot.agent.events import EventBus, ModelCalled
from bot.context.history_trimmed import HistoryTrimmed
from tests.test_agent.rig import TRIM, model_call


async def test_each_event_reaches_the_subscribers_of_its_type() -> None:
    bus = EventBus()
    trims: list[HistoryTrimmed] = []
    calls: list[ModelCalled] = []
    bus.subscribe(trims.append)
    bus.on(ModelCalled, calls.append)

    call = model_call()
    await bus.publish(TRIM)
    await bus.publish(call)

    assert trims == [TRIM]
    assert calls == [call]


async def test_a_failing_subscriber_does_not_stop_the_others() -> None:
    bus = EventBus()
    seen: list[HistoryTrimmed] = []

    def broken(_event: HistoryTrimmed) -> None:
        raise RuntimeError("subscriber bug")

    async def recording(event: HistoryTrimmed) -> None:
        seen.append(event)

    bus.subscribe(broken)
    bus.subscribe(recording)
    await bus.publish(TRIM)

    assert seen == [TRIM]

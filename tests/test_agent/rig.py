"""The app the runtime tests drive (in-memory store, scripted model, recording sender),
and the facts of a model call as the runtime publishes them."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from adapters.llm.scripted import ScriptedModel
from bot.agent.events import ModelCalled
from bot.agent.routes import ModelRoute, Prices
from bot.app.wiring import App
from bot.context.history_trimmed import HistoryTrimmed
from bot.context.tokens import RequestTokens
from bot.domain.ids import SessionKey
from bot.ports import SessionInfo, Usage
from testkit.memory_store import InMemoryStore
from tests.fakes import RecordingMessenger, SteppingClock, inbound
from tests.rig import rig_settings, wire_app

START = datetime(2026, 11, 30, 6, 0, tzinfo=UTC)
CHAT = -100500


def make_app(
    tmp_path: Path,
    model: ScriptedModel,
    messenger: RecordingMessenger,
    *,
    group_tokens: int = 8000,
    **env: str,
) -> tuple[App, InMemoryStore, SteppingClock]:
    """The shared rig's app over an in-memory store, owner 42, the given group budget."""
    settings = rig_settings(tmp_path, owner_id=42, history={"group_tokens": group_tokens}, **env)
    store = InMemoryStore()
    clock = SteppingClock(START)
    app = wire_app(settings, store=store, messenger=messenger, model=model, clock=clock)
    return app, store, clock


async def say(app: App, clock: SteppingClock, mid: int, text: str, **kw: object) -> None:
    """A message 40 s after the previous one, handled to the end (reply included)."""
    clock.advance(40)
    await app.inbound.on_message(inbound(message_id=mid, text=text, at=clock.now(), **kw))  # type: ignore[arg-type]
    await app.inbound.drain()


# ---------------------------------------------------------------- runtime events

AT = datetime(2026, 11, 30, 6, 0, tzinfo=UTC)
SESSION = SessionInfo(id=7, key=SessionKey(chat_id=-100, thread_id=3), scene="group")
ROUTE = ModelRoute(
    profile="main",
    model="gpt-test",
    provider=ScriptedModel(),
    context_window=128_000,
    prices=Prices(input_per_mtok=2.0, cached_input_per_mtok=0.5, output_per_mtok=8.0),
)
TRIM = HistoryTrimmed(
    dropped_messages=6,
    dropped_turns=3,
    kept_turns=4,
    reason="token_budget",
    tokens_before=9000,
    tokens_after=5000,
    budget=6000,
    session=7,
    turn_id="t1",
)


def model_call(**changes: object) -> ModelCalled:
    facts: dict[str, object] = {
        "at": AT,
        "session": SESSION,
        "turn_id": "t1",
        "iteration": 2,
        "final": False,
        "route": ROUTE,
        "usage": Usage(input_tokens=1_000_000, output_tokens=1000, cached_tokens=500_000),
        "tool_calls": 1,
        "error": None,
        "latency_ms": 120,
        "fixed_tokens": 300,
        "tokens": RequestTokens(history=4000, current=200, images=765, messages=4965),
        "trims": (TRIM,),
        "budget": 100_000,
        "history_budget": 6000,
        "kept_turns": 4,
        "dropped_turns": 3,
    }
    facts.update(changes)
    return ModelCalled(**facts)  # type: ignore[arg-type]

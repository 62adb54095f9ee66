"""The wired app: the parts of a turn share what they must (one model caller)."""

from __future__ import annotations

from pathlib import Path

from adapters.llm.scripted import ScriptedModel
from testkit.memory_store import InMemoryStore
from tests.fakes import RecordingMessenger
from tests.rig import rig_settings, wire_app


async def test_the_summary_call_and_the_turn_calls_share_one_model_caller(
    tmp_path: Path,
) -> None:
    """One capacity check, one cache plan, one deadline: the summary call is made by the
    caller the turn's calls use, so both are held to the same window and read one cache."""
    settings = rig_settings(tmp_path, runtime={"max_context_tokens": 50_000})
    app = wire_app(
        settings, store=InMemoryStore(), messenger=RecordingMessenger(), model=ScriptedModel()
    )
    compactor = app.runner.compactor
    assert compactor is not None
    assert compactor.caller is app.runner.calls.caller
    assert compactor.caller.limits.max_context_tokens == 50_000

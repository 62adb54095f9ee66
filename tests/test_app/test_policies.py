"""`turn_policy` and `window_policy`: the settings, read once, become one small policy per
part of a turn."""

from __future__ import annotations

from pathlib import Path

from bot.agent.window_state import SceneCaps
from bot.app.policies import turn_policy, window_policy
from bot.context.window import PerScene
from tests.rig import rig_settings


def test_each_scene_gets_its_budget_and_its_caps_with_overrides_applied(tmp_path: Path) -> None:
    settings = rig_settings(
        tmp_path,
        history={
            "group_tokens": 6_000,
            "private_tokens": 2_000,
            "max_history_turns": 30,
            "max_recent_messages": 80,
            "group": {"max_recent_messages": 250},
            "owner": {"max_history_turns": 90},
        },
    )
    window = window_policy(settings)
    assert window.history_budgets == PerScene(group=6_000, private=2_000, owner=24_000)
    assert window.caps == PerScene(
        group=SceneCaps(max_turns=30, max_messages=250),
        private=SceneCaps(max_turns=30, max_messages=80),
        owner=SceneCaps(max_turns=90, max_messages=80),
    )
    assert window.max_records == 250 * 2 + 20  # the largest cap, with room for tool rows


def test_the_summary_bound_is_read_once_and_held_to_a_quarter_of_the_history(
    tmp_path: Path,
) -> None:
    settings = rig_settings(
        tmp_path,
        history={"private_tokens": 2_000},
        compaction={"route": "cheap", "prepare_margin": 0.2},
        runtime={"max_context_tokens": 50_000, "model_call_deadline_seconds": 30.0},
    )
    policy = turn_policy(settings)
    assert policy.compaction is not None
    assert policy.compaction.summary_budgets == PerScene(group=600, private=500, owner=1_500)
    assert (policy.compaction.route, policy.compaction.prepare_margin) == ("cheap", 0.2)
    assert policy.calls.limits.max_context_tokens == 50_000
    assert policy.calls.deadline_seconds == 30.0


def test_compaction_switched_off_has_no_policy(tmp_path: Path) -> None:
    settings = rig_settings(tmp_path, compaction={"enabled": False})
    assert turn_policy(settings).compaction is None

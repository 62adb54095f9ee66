"""`tgbot import-legacy FILE`: the documented JSONL shape goes in unchanged; projection
strips per-turn blocks from every message but the current one (seen with `context show`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.test_app.conftest import cli_env, tgbot, tgbot_here

CHAT = -100777
TURN_CONTEXT = "[Turn context]\ntime: 2026-10-28 14:03 Asia/Shanghai\nmodel: deepseek-chat"
TOLD = "[Already told the user]\n- the meeting moved to Friday"
PER_TURN_REFS = {
    "deferred-tools": "DEFERRED TOOL INDEX",
    "workspace-rules": "WORKSPACE RULES TEXT",
    "skill:search": "SKILL NOTES TEXT",
    "file-memory:notes.md": "FILE MEMORY TEXT",
    "session-rules:42": "SESSION RULES TEXT",
}


def user(message_id: int, minute: int, sender: tuple[int, str], content: Any) -> dict[str, Any]:
    return {
        "chat_id": CHAT,
        "scene": "group",
        "role": "user",
        "time": f"2026-10-28T06:{minute:02d}:00+00:00",
        "message_id": message_id,
        "sender": {"id": sender[0], "name": sender[1], "is_bot": False},
        "content": content,
    }


def legacy_rows() -> list[dict[str, Any]]:
    refs = [{"type": "contextRef", "key": k, "text": v} for k, v in PER_TURN_REFS.items()]
    return [
        user(
            812,
            3,
            (1001, "Alice"),
            [
                {"type": "text", "text": "Is the deploy at five?"},
                {"type": "text", "text": TURN_CONTEXT},
                *refs,
                {"type": "contextRef", "key": "attachment:plan", "text": "ATTACHED PLAN"},
                {"type": "text", "text": TOLD},
            ],
        ),
        {
            "chat_id": CHAT,
            "role": "assistant",
            "time": "2026-10-28T06:04:00+00:00",
            "message_ids": [813],
            "content": "Yes, at five.",
        },
        user(814, 5, (1002, "Bob"), f"Thanks!\n\n{TOLD}\n\n{TURN_CONTEXT}"),
        {
            "chat_id": CHAT,
            "role": "assistant",
            "time": "2026-10-28T06:06:00+00:00",
            "content": [{"type": "text", "text": ""}],
            "tool_calls": [{"id": "c1", "name": "search_notes", "arguments": {"q": "deploy"}}],
        },
        {
            "chat_id": CHAT,
            "role": "tool",
            "time": "2026-10-28T06:06:00+00:00",
            "tool_call_id": "c1",
            "name": "search_notes",
            "content": "deploy: Friday 17:00",
        },
        {
            "chat_id": CHAT,
            "role": "assistant",
            "time": "2026-10-28T06:06:30+00:00",
            "message_ids": [815],
            "content": "It moved to Friday.",
        },
        user(
            816,
            8,
            (1003, "Chen"),
            [{"type": "text", "text": "What next?"}, {"type": "text", "text": TURN_CONTEXT}],
        ),
    ]


@pytest.mark.slow  # `tgbot import-legacy`'s one real-process test
async def test_imported_rows_are_projected_without_per_turn_blocks(tmp_path: Path) -> None:
    export = tmp_path / "export.jsonl"
    export.write_text("\n".join(json.dumps(r) for r in legacy_rows()) + "\n", encoding="utf-8")
    env = cli_env(tmp_path / "data")

    done = await tgbot("import-legacy", str(export), env=env)
    assert done.code == 0, done.err
    assert done.out.strip() == "imported 7 rows into 1 sessions"

    shown = await tgbot("context", "show", "--chat", str(CHAT), env=env)
    assert shown.code == 0, shown.err
    blocks = shown.out.split("\n--- [")
    history, current = "\n".join(blocks[1:-1]), blocks[-1]
    assert "[id:m1;user:Alice;user_id:1001;date:2026-10-28;time:06:03;]" in history
    assert "Is the deploy at five?\n\nATTACHED PLAN" in history
    assert "[id:m3;user:Bob;user_id:1002;time:06:05;]\nThanks!" in history
    assert "tool_call c1: search_notes(" in history
    assert "deploy: Friday 17:00" in history
    assert "It moved to Friday." in history
    for stripped in ("[Turn context]", "[Already told the user]", *PER_TURN_REFS.values()):
        assert stripped not in history, stripped
    # the current message keeps its row as exported and gets today's per-turn context
    assert current.startswith("7] user")
    assert "What next?" in current
    assert current.count("[Turn context]") == 2


async def test_a_bad_line_is_reported_by_number_and_the_rest_imported(tmp_path: Path) -> None:
    export = tmp_path / "export.jsonl"
    rows = [json.dumps(r) for r in legacy_rows()[:2]]
    export.write_text(f"{rows[0]}\n{{not json\n{rows[1]}\n", encoding="utf-8")

    done = await tgbot_here("import-legacy", str(export), env=cli_env(tmp_path / "data"))
    assert done.code == 1
    assert done.err.startswith("line 2: ")
    assert done.out.strip() == "imported 2 rows into 1 sessions"

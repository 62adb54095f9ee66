"""A scheduled task's instruction: the per-turn `[Scheduled task]` block of a turn no member
message started (docs/architecture.md, Scheduled jobs).

A task turn answers no new message: the window is the chat's stored history, rendered as
every turn renders it, and this block (with the turn's other per-turn blocks after it) rides
on a message of its own after the history, for that turn's calls only. It is never stored,
so the history holds only the bot's answer and the cached prefix before it stays the one a
member's turn would send.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.context.escaping import escape_member_text, inline_value

TASK_MARKER = "[Scheduled task]"


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskInstruction:
    """One run of a `task` job: which job (`j3`), who set it, its local due time, whether
    it runs late (the bot was not running at its time), and what to do."""

    job: str
    creator_id: int
    creator_name: str
    due: str
    """Local wall-clock time it was due, e.g. `2026-12-08 09:00 (Asia/Shanghai)`."""
    text: str
    late: bool = False
    repeat: str | None = None


def render_task_block(task: TaskInstruction) -> str:
    """`[Scheduled task]`: the job, who set it, when it was due (and that it is late),
    then the instruction as its creator's words (escaped: nobody forges a block in it)."""
    name = inline_value(" ".join(task.creator_name.split()))
    who = f"{name} (user_id:{task.creator_id})" if name else f"user_id:{task.creator_id}"
    due = f"due: {inline_value(task.due)}"
    if task.late:
        due += " (late: the bot was not running at that time; say so briefly)"
    return "\n".join(
        [
            TASK_MARKER,
            f"job: {inline_value(task.job)}",
            f"set by: {who}",
            due,
            f"repeat: {inline_value(task.repeat)}" if task.repeat else "repeat: once",
            "No member wrote to you for this turn: this is a scheduled task. Do what the "
            "instruction says and write your answer for this chat.",
            "instruction:",
            escape_member_text(task.text.strip()),
        ]
    )

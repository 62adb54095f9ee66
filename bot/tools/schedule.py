"""schedule, list_scheduled, cancel_scheduled: reminders and scheduled posts for members.

Offered in every scene (their schemas are part of the cached prefix); who may do what is
checked when they run (`bot.services.jobs.JobBook`). A refusal is a `ToolError` the model
reads, and nothing is stored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from bot.domain.jobs import Job, JobMode
from bot.domain.records import UserRecord
from bot.errors import ToolError
from bot.ports import ToolSpec
from bot.services.jobs import JobBook, JobRefused, JobRequest, local_text
from bot.tools.base import Tool, ToolContext, require_str

SCHEDULE = "schedule"
LIST_SCHEDULED = "list_scheduled"
CANCEL_SCHEDULED = "cancel_scheduled"


def _asker(ctx: ToolContext) -> tuple[int, str]:
    rights = ctx.rights
    asker = rights.requester_id if rights is not None else None
    if asker is None:
        raise ToolError(
            "not allowed: no member asked for this turn, so there is nobody to set it for",
            code="not_allowed",
        )
    name = next(
        (
            r.body.sender.name
            for r in reversed(ctx.records)
            if isinstance(r.body, UserRecord) and r.body.sender.id == asker
        ),
        "",
    )
    return asker, name


def _optional_str(args: Mapping[str, Any], name: str) -> str | None:
    value = args.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ToolError(f"argument {name!r} must be a string", code="bad_arguments")
    return value


def _job_view(job: Job) -> dict[str, object]:
    from zoneinfo import ZoneInfo

    zone = ZoneInfo(job.zone)
    return {
        "job": job.name,
        "next": local_text(job.next_at, zone) if job.next_at is not None else None,
        "repeat": job.repeat or "once",
        "mode": job.mode,
        "chat": job.chat_id,
        "set_by": job.creator_name or str(job.creator_id),
        "text": job.text if len(job.text) <= 200 else job.text[:200] + "…",
    }


def schedule_tools(book: JobBook) -> tuple[Tool, Tool, Tool]:
    """The three job tools over `book`."""

    async def schedule(args: Mapping[str, Any], ctx: ToolContext) -> str:
        asker, name = _asker(ctx)
        at = require_str(args, "at", max_len=100)
        body = require_str(args, "text")
        mode = _optional_str(args, "mode") or "post"
        reference = args.get("reference")
        if reference is not None and (
            isinstance(reference, bool) or not isinstance(reference, int)
        ):
            raise ToolError(
                "argument 'reference' must be a message alias such as m12", code="bad_arguments"
            )
        chat = args.get("chat")
        if chat is not None and (isinstance(chat, bool) or not isinstance(chat, int)):
            try:
                chat = int(str(chat))
            except ValueError:
                raise ToolError("argument 'chat' must be a chat id", code="bad_arguments") from None
        try:
            job = await book.schedule(
                JobRequest(
                    asker_id=asker,
                    asker_name=name,
                    here_chat=ctx.chat_id,
                    here_thread=ctx.thread_id,
                    at=at,
                    text=body,
                    repeat=_optional_str(args, "repeat"),
                    mode=cast(JobMode, mode),
                    reply_to=reference,
                    chat=chat,
                    zone=ctx.zone,
                )
            )
        except JobRefused as exc:
            raise ToolError(str(exc), code="not_scheduled") from None
        assert job.next_at is not None
        return json.dumps(
            {
                "job": job.name,
                "at": local_text(job.next_at, ctx.zone),
                "repeat": job.repeat or "once",
                "mode": job.mode,
            },
            ensure_ascii=False,
        )

    async def list_scheduled(args: Mapping[str, Any], ctx: ToolContext) -> str:
        asker = ctx.rights.requester_id if ctx.rights is not None else None
        jobs = await book.visible(asker, ctx.chat_id)
        return json.dumps({"jobs": [_job_view(job) for job in jobs]}, ensure_ascii=False)

    async def cancel_scheduled(args: Mapping[str, Any], ctx: ToolContext) -> str:
        asker, _ = _asker(ctx)
        name = require_str(args, "job", max_len=40)
        rights = ctx.rights

        async def is_admin(chat_id: int) -> bool:
            return rights is not None and await rights.requester_privileged(chat_id)

        try:
            job = await book.cancel(asker, name, here_chat=ctx.chat_id, is_admin=is_admin)
        except JobRefused as exc:
            raise ToolError(str(exc), code="not_allowed") from None
        return json.dumps({"cancelled": job.name})

    return (
        Tool(
            spec=ToolSpec(
                name=SCHEDULE,
                description=(
                    "Post text at a time (at: ISO-8601, chat's time zone unless it has an "
                    "offset). mode task: run a turn then with text as your instruction. "
                    "Answers job id and local time: tell the member both."
                ),
                parameters={
                    "type": "object",
                    "properties": {
                        "at": {"type": "string"},
                        "text": {"type": "string"},
                        "repeat": {
                            "type": "string",
                            "description": "daily|weekdays|weekly|monthly|5-field cron",
                        },
                        "mode": {"type": "string", "enum": ["post", "task"]},
                        "reference": {"type": "string", "description": "alias to reply to"},
                        "chat": {"type": "integer", "description": "owner only"},
                    },
                    "required": ["at", "text"],
                },
            ),
            run=schedule,
            summary="schedule(at, text, repeat?, mode?, reference?, chat?) — reminders, posts",
        ),
        Tool(
            spec=ToolSpec(
                name=LIST_SCHEDULED,
                description="This chat's scheduled jobs.",
                parameters={"type": "object", "properties": {}},
            ),
            run=list_scheduled,
            summary="list_scheduled() — this chat's scheduled jobs",
        ),
        Tool(
            spec=ToolSpec(
                name=CANCEL_SCHEDULED,
                description="Cancel a scheduled job.",
                parameters={
                    "type": "object",
                    "properties": {"job": {"type": "string", "description": "e.g. j3"}},
                    "required": ["job"],
                },
            ),
            run=cancel_scheduled,
            summary="cancel_scheduled(job) — cancel a scheduled job",
        ),
    )

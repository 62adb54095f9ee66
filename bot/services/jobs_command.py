"""`/jobs` and `/jobs cancel jN`: the scheduled jobs a person may see, in their language."""

from __future__ import annotations

from zoneinfo import ZoneInfo

from bot.domain.facts import InboundMessage
from bot.domain.ids import Locale
from bot.domain.jobs import Job
from bot.errors import TelegramError
from bot.ports import Messenger
from bot.services.jobs import JobBook, JobRefused
from bot.texts import text

PREVIEW_CHARS = 60


class JobsCommand:
    """Lists the jobs the asker may see here; `cancel jN` cancels one they may cancel."""

    def __init__(self, book: JobBook, messenger: Messenger) -> None:
        self.book = book
        self.messenger = messenger

    async def __call__(self, message: InboundMessage, locale: Locale) -> str:
        words = message.text.split()
        args = words[1:] if words and words[0].startswith("/") else words
        asker = message.sender.id
        if args and args[0].lower() == "cancel":
            if len(args) != 2:
                return text(locale, "jobs_cancel_usage")

            async def is_admin(chat_id: int) -> bool:
                try:
                    return await self.messenger.is_chat_admin(chat_id, asker)
                except TelegramError:
                    return False

            try:
                job = await self.book.cancel(
                    asker, args[1], here_chat=message.chat_id, is_admin=is_admin
                )
            except JobRefused as exc:
                return text(locale, exc.key, job=args[1])
            return text(locale, "jobs_cancelled", job=job.name)
        jobs = await self.book.visible(asker, message.chat_id)
        if not jobs:
            return text(locale, "jobs_none")
        lines = [text(locale, "jobs_header")]
        lines.extend(self._line(job, locale) for job in jobs)
        return "\n".join(lines)

    @staticmethod
    def _line(job: Job, locale: Locale) -> str:
        when = "-"
        if job.next_at is not None:
            when = f"{job.next_at.astimezone(ZoneInfo(job.zone)):%Y-%m-%d %H:%M}"
        preview = job.text if len(job.text) <= PREVIEW_CHARS else job.text[:PREVIEW_CHARS] + "…"
        return text(
            locale,
            "jobs_line",
            job=job.name,
            when=when,
            repeat=job.repeat or text(locale, "jobs_once"),
            mode=job.mode,
            creator=job.creator_name or job.creator_id,
            preview=preview,
        )

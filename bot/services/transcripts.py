"""Voice and video notes transcribed once, when they are stored (docs/architecture.md,
Images, documents and voice).

With a `[transcription]` endpoint, a voice or video note that starts a turn (`transcribe =
"mentions"`, the default) or any one in a served chat (`"all"`) is transcribed before it is
stored; the transcript is part of the stored message from then on (`[语音 12s] see you at
noon`), so every later request repeats it byte for byte. Each call is a ledger line
(`purpose: transcription`) with its cost at `price_per_minute`. A failure (the file, the
endpoint, the deadline) is logged and the message is stored with its placeholder only.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from dataclasses import dataclass
from typing import Literal

from bot.agent.ledger import LedgerEntry
from bot.agent.ledger_file import LedgerWriter
from bot.agent.runtime import new_turn_id
from bot.agent.traces import new_call_id
from bot.domain.facts import InboundMessage, Media
from bot.errors import MediaRefused
from bot.ports import Clock, MediaFiles, SessionInfo, Transcriber

log = logging.getLogger("tgbot.media")

SPOKEN_KINDS = frozenset({"voice", "video_note"})
TranscribeMode = Literal["mentions", "all", "off"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TranscriptionPolicy:
    mode: TranscribeMode = "mentions"
    model: str = "whisper-1"
    price_per_minute: float = 0.0
    """0: the cost is unknown (no price configured), written as `null`."""
    timeout_seconds: float = 30.0


class VoiceTranscripts:
    """Adds transcripts to the spoken media of a message before it is stored."""

    def __init__(
        self,
        *,
        transcriber: Transcriber,
        files: MediaFiles,
        ledger: LedgerWriter,
        clock: Clock,
        policy: TranscriptionPolicy,
    ) -> None:
        self.transcriber = transcriber
        self.files = files
        self.ledger = ledger
        self.clock = clock
        self.policy = policy

    def wanted(self, message: InboundMessage, *, answers: bool) -> bool:
        """Whether the message has a spoken note this mode transcribes."""
        mode = self.policy.mode
        if mode == "off" or (mode == "mentions" and not answers):
            return False
        return any(_untranscribed(m) for m in message.media)

    async def transcribed(
        self, message: InboundMessage, session: SessionInfo, *, answers: bool
    ) -> InboundMessage:
        """`message` with its voice or video note's transcript, when the mode asks for one."""
        if not self.wanted(message, answers=answers):
            return message
        media = list(message.media)
        for index, item in enumerate(media):
            if _untranscribed(item):
                text = await self._transcribe(item, session, message)
                if text:
                    media[index] = dataclasses.replace(item, transcript=text)
        return dataclasses.replace(message, media=tuple(media))

    async def _transcribe(
        self, media: Media, session: SessionInfo, message: InboundMessage
    ) -> str | None:
        started = time.monotonic()
        error: str | None = None
        text: str | None = None
        try:
            async with asyncio.timeout(self.policy.timeout_seconds):
                audio = await self.files.file(media)
                text = await self.transcriber.transcribe(
                    audio,
                    file_name=_file_name(media),
                    mime_type=media.mime_type or "audio/ogg",
                )
        except MediaRefused as refused:
            error = f"MediaRefused: {refused.reason}"
        except TimeoutError:
            error = f"TimeoutError: no transcript within {self.policy.timeout_seconds:g} s"
        if error is not None:
            log.info(
                "voice note %s/%s not transcribed: %s",
                session.key.chat_id,
                message.message_id,
                error,
            )
        await self._ledger(session, media, started, error)
        return text

    async def _ledger(
        self, session: SessionInfo, media: Media, started: float, error: str | None
    ) -> None:
        now = self.clock.now()
        seconds = max(0, media.duration or 0)
        price = self.policy.price_per_minute
        cost = None if price <= 0 or error is not None else round(seconds / 60 * price, 8)
        entry = LedgerEntry(
            ts=now,
            session=session.id,
            chat=session.key.chat_id,
            thread=session.key.thread_id,
            scene=session.scene,
            turn_id=new_turn_id(),
            purpose="transcription",
            provider="transcription",
            model=self.policy.model,
            latency_ms=int((time.monotonic() - started) * 1000),
            error=error,
            cost=cost,
            call_id=new_call_id(now),
        )
        try:
            await self.ledger.append_async(entry)
        except OSError:
            log.exception("the ledger line of a transcription was not written")


def _untranscribed(media: Media) -> bool:
    return media.kind in SPOKEN_KINDS and media.file_id is not None and not media.transcript


def _file_name(media: Media) -> str:
    """A name whose extension tells the endpoint the container (whisper reads it)."""
    if media.kind == "video_note":
        return "video_note.mp4"
    mime = (media.mime_type or "").lower()
    if "mpeg" in mime or "mp3" in mime:
        return "voice.mp3"
    if "wav" in mime:
        return "voice.wav"
    return "voice.ogg"

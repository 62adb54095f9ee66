"""Voice and video notes transcribed once, when they are stored (docs/architecture.md,
Images, documents and voice).

With a `[transcription]` endpoint, a voice or video note that starts a turn (`transcribe =
"mentions"`, the default) or any one in a served chat (`"all"`) is transcribed before it is
stored; the transcript is part of the stored message from then on (`[语音 12s] see you at
noon`), so every later request repeats it byte for byte. Each call is a ledger line
(`purpose: transcription`) with its cost at `price_per_minute`. A failure (the file, the
endpoint, the deadline) is logged and the message is stored with its placeholder only.

Spend limits (`bot.agent.spend.SpendGuard.hold_cost`): before the file is downloaded, the
call's bound (the longest audio the file's size can hold, at `price_per_minute`) is held on
the member's, the chat's and the bot's budgets; a spent budget leaves the note
untranscribed and undownloaded. The ledger and the budgets count the seconds the endpoint
reports (it bills them), never the duration the update declares; when it reports none, the
bound.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from bot.agent.ledger import LedgerEntry
from bot.agent.ledger_file import LedgerWriter
from bot.agent.runtime import new_turn_id
from bot.agent.traces import new_call_id
from bot.domain.facts import InboundMessage, Media
from bot.domain.ids import Scene
from bot.errors import BudgetExceeded, MediaRefused
from bot.ports import Clock, MediaFiles, SessionInfo, Transcriber

log = logging.getLogger("tgbot.media")

SPOKEN_KINDS = frozenset({"voice", "video_note"})
MIN_BYTES_PER_SECOND = 1_000
"""The lowest bitrate a voice note is bounded by (8 kbit/s, under Telegram's Opus notes):
a file of N bytes holds at most N / 1,000 seconds."""
UNKNOWN_SIZE_BYTES = 20 * 1024 * 1024
"""A file whose size the update does not say is bounded as the largest the Bot API serves."""
TranscribeMode = Literal["mentions", "all", "off"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TranscriptionPolicy:
    mode: TranscribeMode = "mentions"
    model: str = "whisper-1"
    price_per_minute: float = 0.0
    """0: the cost is unknown (no price configured), written as `null`."""
    timeout_seconds: float = 30.0


class TranscriptionSpend(Protocol):
    """The spend limits' side of a transcription (`bot.agent.spend.SpendGuard`)."""

    async def hold_cost(
        self, chat_id: int, scene: Scene, user_id: int | None, bound: float
    ) -> Any: ...

    async def settle_cost(self, held: Any, cost: float) -> None: ...


def bound_seconds(media: Media) -> float:
    """The longest audio `media`'s file can hold, from its size (never its declared length)."""
    size = media.file_size if media.file_size and media.file_size > 0 else UNKNOWN_SIZE_BYTES
    return size / MIN_BYTES_PER_SECOND


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
        spend: TranscriptionSpend | None = None,
    ) -> None:
        self.spend = spend
        """Spend limits (None: none)."""
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
        price = self.policy.price_per_minute
        bound = bound_seconds(media)
        held = None
        if self.spend is not None:
            try:
                held = await self.spend.hold_cost(
                    session.key.chat_id, session.scene, message.sender.id, bound / 60 * price
                )
            except BudgetExceeded as spent:
                log.info(
                    "voice note %s/%s not transcribed: %s",
                    session.key.chat_id,
                    message.message_id,
                    spent,
                )
                return None
        started = time.monotonic()
        error: str | None = None
        transcript = None
        try:
            async with asyncio.timeout(self.policy.timeout_seconds):
                audio = await self.files.file(media)
                transcript = await self.transcriber.transcribe(
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
        seconds = None
        if transcript is not None:  # billed as the endpoint measured it, else the bound
            seconds = transcript.seconds if transcript.seconds is not None else bound
        cost = None if price <= 0 or seconds is None else round(seconds / 60 * price, 8)
        if held is not None and self.spend is not None:
            await self.spend.settle_cost(held, cost or 0.0)
        await self._ledger(session, started, error, cost)
        return transcript.text if transcript is not None else None

    async def _ledger(
        self, session: SessionInfo, started: float, error: str | None, cost: float | None
    ) -> None:
        now = self.clock.now()
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

"""Speech to text through an OpenAI-compatible `/audio/transcriptions` endpoint (OpenAI,
Groq, a local whisper server): the `Transcriber` port. Reference:
platform.openai.com/docs/api-reference/audio/createTranscription (multipart `file` and
`model`; with `response_format=verbose_json` the answer is `{"text": ..., "duration": ...}`,
and newer models say `usage: {"type": "duration", "seconds": ...}`: the seconds billed).
"""

from __future__ import annotations

import httpx

from bot.errors import MediaRefused
from bot.ports import Transcript

MAX_TRANSCRIPT_CHARS = 4000
"""A transcript is stored with its message: a ten-minute monologue is cut here."""


class OpenAITranscriber:
    """One endpoint and model, over its own HTTP client."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        model: str,
        timeout: float = 30.0,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.url = base_url.rstrip("/") + "/audio/transcriptions"
        self.model = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = client or httpx.AsyncClient(timeout=httpx.Timeout(timeout), headers=headers)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def transcribe(self, audio: bytes, *, file_name: str, mime_type: str) -> Transcript:
        try:
            response = await self._client.post(
                self.url,
                data={"model": self.model, "response_format": "verbose_json"},
                files={"file": (file_name, audio, mime_type or "application/octet-stream")},
            )
        except httpx.HTTPError as exc:
            raise MediaRefused(f"the transcription failed ({type(exc).__name__})") from None
        if response.status_code != 200:
            raise MediaRefused(f"the transcription failed (HTTP {response.status_code})")
        try:
            body = response.json()
        except ValueError:
            raise MediaRefused("the transcription answer was not JSON") from None
        text = body.get("text") if isinstance(body, dict) else None
        if not isinstance(text, str):
            raise MediaRefused("the transcription answer had no text")
        assert isinstance(body, dict)
        return Transcript(" ".join(text.split())[:MAX_TRANSCRIPT_CHARS], billed_seconds(body))


def billed_seconds(body: dict[str, object]) -> float | None:
    """The audio's length as the endpoint reports it: `usage.seconds` (a duration usage),
    else verbose_json's `duration`; None when neither is a number."""
    usage = body.get("usage")
    if isinstance(usage, dict):
        seconds = usage.get("seconds")
        if isinstance(seconds, int | float) and not isinstance(seconds, bool) and seconds >= 0:
            return float(seconds)
    duration = body.get("duration")
    if isinstance(duration, int | float) and not isinstance(duration, bool) and duration >= 0:
        return float(duration)
    return None

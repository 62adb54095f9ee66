"""Speech to text through an OpenAI-compatible `/audio/transcriptions` endpoint (OpenAI,
Groq, a local whisper server): the `Transcriber` port. Reference:
platform.openai.com/docs/api-reference/audio/createTranscription (multipart `file` and
`model`; the answer is `{"text": ...}`).
"""

from __future__ import annotations

import httpx

from bot.errors import MediaRefused

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

    async def transcribe(self, audio: bytes, *, file_name: str, mime_type: str) -> str:
        try:
            response = await self._client.post(
                self.url,
                data={"model": self.model, "response_format": "json"},
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
        return " ".join(text.split())[:MAX_TRANSCRIPT_CHARS]

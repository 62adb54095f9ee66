"""A fake OpenAI-compatible transcription server on 127.0.0.1 for tests: answers
`POST /v1/audio/transcriptions` with the text registered for the uploaded bytes, and records
every call (model, file name, size)."""

from __future__ import annotations

from typing import Any

from aiohttp import web


class FakeTranscriptionServer:
    """`base_url` is `http://127.0.0.1:<port>/v1`; `say(audio, text)` decides the answer."""

    def __init__(self) -> None:
        self.texts: dict[bytes, str] = {}
        self.seconds: dict[bytes, float] = {}
        self.calls: list[dict[str, Any]] = []
        self._runner: web.AppRunner | None = None
        self._port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}/v1"

    def say(self, audio: bytes, text: str, *, seconds: float | None = None) -> None:
        """Answer `text` for `audio`; with `seconds`, report (and bill) that length, as
        verbose_json's `duration` does."""
        self.texts[audio] = text
        if seconds is not None:
            self.seconds[audio] = seconds

    async def __aenter__(self) -> FakeTranscriptionServer:
        app = web.Application()
        app.router.add_post("/v1/audio/transcriptions", self._transcribe)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = int(self._runner.addresses[0][1])
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _transcribe(self, request: web.Request) -> web.Response:
        form = await request.post()
        upload = form.get("file")
        if not isinstance(upload, web.FileField):
            return web.json_response({"error": {"message": "file is required"}}, status=400)
        audio = upload.file.read()
        self.calls.append(
            {
                "model": form.get("model"),
                "file_name": upload.filename,
                "bytes": len(audio),
                "authorization": request.headers.get("Authorization", ""),
            }
        )
        text = self.texts.get(audio)
        if text is None:
            return web.json_response({"error": {"message": "unknown audio"}}, status=400)
        if audio in self.seconds:
            return web.json_response({"text": text, "duration": self.seconds[audio]})
        return web.json_response({"text": text})

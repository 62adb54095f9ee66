"""The OpenAI-compatible chat-completions provider: transport, bounded retries, error mapping.

What goes on the wire is `openai_wire`'s job; this module only sends it. Retry policy:

- 429, 5xx, timeouts and network failures are retried up to `max_retries` times (so at most
  `max_retries + 1` attempts) with exponential backoff and jitter: attempt `n` waits a random
  time in `[d/2, d]` where `d = min(backoff_max, backoff_base * 2**n)`.
- A `Retry-After` (or `retry-after-ms`) header is honoured as given instead of the backoff;
  when it asks for more than `max_retry_after` seconds the call gives up at once with
  `ProviderRateLimited` (its `retry_after` says how long the provider wanted).
- A 2xx body that is not JSON or cannot be mapped (`ProviderBadResponse`) is retried once:
  proxies sometimes cut a body short, but a model that keeps answering nonsense will not
  improve by asking again and again.
- `ContextOverflow` and other 4xx are never retried: the caller must change the request.

The API key travels only in the Authorization header; error messages and logs are scrubbed
of it in case a provider echoes it back.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Literal, Self

import httpx

from adapters.llm.openai_wire import classify_error, from_response, retry_after_seconds, to_request
from bot.errors import (
    ProviderBadResponse,
    ProviderError,
    ProviderRateLimited,
    ProviderUnavailable,
)
from bot.ports import LLMRequest, LLMResponse, TextSink

logger = logging.getLogger(__name__)

DEFAULT_MAX_RETRY_AFTER = 60.0
_BAD_RESPONSE_RETRIES = 1


class OpenAIProvider:
    """`LLMProvider` for any OpenAI-compatible `/chat/completions` endpoint."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        timeout: float = 60,
        max_retries: int = 3,
        backoff_base: float = 0.5,
        backoff_max: float = 20,
        max_retry_after: float = DEFAULT_MAX_RETRY_AFTER,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._api_key = api_key or None
        self._timeout = timeout
        self._max_retries = max_retries
        self._backoff_base = backoff_base
        self._backoff_max = backoff_max
        self._max_retry_after = max_retry_after
        self._sleep = sleep
        self._rng = rng or random.Random()
        headers = {"Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        self._client = httpx.AsyncClient(
            transport=transport, timeout=httpx.Timeout(timeout), headers=headers
        )

    def __repr__(self) -> str:
        return f"OpenAIProvider({self._url!r})"

    @property
    def url(self) -> str:
        """The chat-completions URL requests go to."""
        return self._url

    async def aclose(self) -> None:
        await self._client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def complete(
        self, request: LLMRequest, *, on_text: TextSink | None = None
    ) -> LLMResponse:
        payload = to_request(request)
        bad_responses = 0
        attempt = 0
        while True:
            try:
                return await self._attempt(payload)
            except _Failed as failed:
                failure = failed
            error = failure.error
            if failure.kind == "final" or attempt >= self._max_retries:
                raise error from failure.__cause__
            if failure.kind == "bad_body":
                bad_responses += 1
                if bad_responses > _BAD_RESPONSE_RETRIES:
                    raise error from failure.__cause__
            delay = self._delay(failure.retry_after, attempt)
            if delay is None:
                raise error from failure.__cause__
            attempt += 1
            logger.warning(
                "LLM call to %s failed (%s); retry %d of %d in %.2fs",
                self._url,
                error,
                attempt,
                self._max_retries,
                delay,
            )
            await self._sleep(delay)

    def _delay(self, retry_after: float | None, attempt: int) -> float | None:
        """Seconds to wait before the next attempt; `None` to give up now."""
        if retry_after is not None:
            return retry_after if retry_after <= self._max_retry_after else None
        ceiling = min(self._backoff_max, self._backoff_base * 2.0**attempt)
        return ceiling * (0.5 + 0.5 * self._rng.random())

    async def _attempt(self, payload: dict[str, Any]) -> LLMResponse:
        try:
            response = await self._client.post(self._url, json=payload)
        except httpx.TimeoutException as exc:
            message = f"no answer from {self._url} within {self._timeout:g}s"
            raise _Failed(ProviderUnavailable(f"{message} ({type(exc).__name__})")) from exc
        except httpx.TransportError as exc:
            message = self._scrub(f"cannot reach {self._url}: {type(exc).__name__}: {exc}")
            raise _Failed(ProviderUnavailable(message)) from exc
        if response.is_success:
            try:
                body = response.json()
            except ValueError as exc:
                not_json = ProviderBadResponse(f"HTTP {response.status_code}: body is not JSON")
                raise _Failed(not_json, kind="bad_body") from exc
            try:
                return from_response(body)
            except ProviderBadResponse as exc:
                unmapped = ProviderBadResponse(self._scrub(str(exc)))
                raise _Failed(unmapped, kind="bad_body") from None
        error = classify_error(response.status_code, self._scrub(response.text), response.headers)
        match error:
            case ProviderRateLimited():
                raise _Failed(error, retry_after=error.retry_after)
            case ProviderUnavailable():
                # a 503 may also say when to come back
                raise _Failed(error, retry_after=retry_after_seconds(response.headers))
            case _:
                raise _Failed(error, kind="final")

    def _scrub(self, text: str) -> str:
        if self._api_key and self._api_key in text:
            return text.replace(self._api_key, "***")
        return text


class _Failed(Exception):
    """One failed attempt: the error to raise and whether another attempt may help."""

    def __init__(
        self,
        error: ProviderError,
        *,
        kind: Literal["transient", "bad_body", "final"] = "transient",
        retry_after: float | None = None,
    ) -> None:
        super().__init__(str(error))
        self.error = error
        self.kind = kind
        self.retry_after = retry_after


__all__ = ["DEFAULT_MAX_RETRY_AFTER", "OpenAIProvider"]

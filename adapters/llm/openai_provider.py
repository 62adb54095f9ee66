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

The API key travels only in the Authorization header (`x-api-key` for Anthropic); error
messages and logs are scrubbed of it in case a provider echoes it back.

Streaming: given `on_text` (and a profile that streams), the request asks for an event stream
and `on_text` gets the reply's text so far as it grows; the result is the response `complete`
would return without streaming, usage included. An error inside the stream maps to the same
`ProviderError` branch as an error response. A retried attempt starts its text from scratch.

`AnthropicProvider` (`adapters.llm.anthropic_provider`) is the same transport and retry policy
over `anthropic_wire`.

Transport: the requests are httpx's, sent over aiohttp's connection pool
(`adapters.llm.pooled_transport`); tests hand in their own `transport`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from types import TracebackType
from typing import Any, ParamSpec, Self, TypeVar

import httpx

from adapters.llm import anthropic_wire, openai_wire
from adapters.llm.dialects import WireOptions
from adapters.llm.openai_stream import OpenAIStream
from adapters.llm.pooled_transport import pooled_transport, tls_context
from adapters.llm.provider_errors import (
    FailedAttempt,
    classify_error,
    failed_attempt,
    scrub,
    scrubbed,
)
from bot.errors import (
    ProviderBadResponse,
    ProviderError,
    ProviderUnavailable,
)
from bot.ports import LLMRequest, LLMResponse, SentBody, TextSink, ToolSpec

logger = logging.getLogger(__name__)

DEFAULT_MAX_RETRY_AFTER = 60.0
_T = TypeVar("_T")
_P = ParamSpec("_P")
_BAD_RESPONSE_RETRIES = 1
_TOOL_SETS_KEPT = 16
"""Tool sets whose JSON a provider keeps (one per scene and locale in practice)."""


ResponseStream = OpenAIStream | anthropic_wire.StreamState
"""A response stream being read: each feeds events, has the text so far and the result."""


class OpenAIProvider:
    """`LLMProvider` for any OpenAI-compatible `/chat/completions` endpoint."""

    _PATH = "/chat/completions"
    _SPLICES_TOOLS = True
    # the wire's two mappings, called straight (`AnthropicProvider` names its own)
    _to_request = staticmethod(openai_wire.to_request)
    _from_response = staticmethod(openai_wire.from_response)
    """Whether the tools' JSON depends on the tool set alone (see `_body`)."""

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
        options: WireOptions | None = None,
    ) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self._url = self._endpoint(base_url.rstrip("/"))
        self._options = options or self._default_options()
        self._api_key = api_key or None
        self._timeout = timeout
        self._max_retries = max_retries
        self._backoff_base = backoff_base
        self._backoff_max = backoff_max
        self._max_retry_after = max_retry_after
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._transport = pooled_transport(transport)
        self._client = httpx.AsyncClient(
            transport=self._transport,
            timeout=httpx.Timeout(timeout),
            headers=self._headers(),
            verify=tls_context(),
        )
        self._timeouts = self._client.timeout.as_dict()
        self._tools_json: dict[int, tuple[tuple[ToolSpec, ...], bytes]] = {}
        """id of a tool set → the set (held, so the id stays its own) and its JSON."""

    def _body(self, request: LLMRequest, *, stream: bool) -> bytes:
        """The JSON body of `request`. The tool schemas are the same list call after call
        (a route's tool set is built once), and encoding them was about half of encoding
        the body: their JSON is kept per tool set and spliced in as the last field. Only
        where the dialect writes them as a pure function of the tool set (chat completions,
        no `extra_body` of its own for them)."""
        payload = self._to_request(request, self._options, stream=stream)
        if not request.tools or not self._SPLICES_TOOLS or "tools" in self._options.extra_body:
            return _json_body(payload)
        tools = payload.pop("tools")
        kept = self._tools_json.get(id(request.tools))
        if kept is None or kept[0] is not request.tools:
            kept = (request.tools, _json_body(tools))
            if len(self._tools_json) >= _TOOL_SETS_KEPT:
                self._tools_json.clear()
            self._tools_json[id(request.tools)] = kept
        return _json_body(payload)[:-1] + b',"tools":' + kept[1] + b"}"

    # the dialect hooks (`AnthropicProvider` overrides them)

    def _endpoint(self, base_url: str) -> str:
        return base_url + self._PATH

    def _default_options(self) -> WireOptions:
        return WireOptions()

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _new_stream(self) -> ResponseStream:
        return OpenAIStream()

    def _request_headers(self, request: LLMRequest) -> dict[str, str]:
        header = self._options.conversation_header
        plan = request.cache_plan
        if header and plan and plan.session_key and self._options.cache != "off":
            return {header: plan.session_key}
        return {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._url!r})"

    @property
    def options(self) -> WireOptions:
        """The dialect this provider speaks."""
        return self._options

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
        stream = on_text is not None and self._options.stream
        # encoded once, here: the same bytes go on the wire and into the call's trace
        sent = SentBody(self._options.kind, self._body(request, stream=stream))
        headers = {**self._request_headers(request), "Content-Type": "application/json"}
        bad_responses = 0
        attempt = 0
        while True:
            try:
                if stream and on_text is not None:
                    response = await self._attempt_stream(sent.body, headers, on_text)
                else:
                    response = await self._attempt(sent.body, headers)
                return replace(_tagged(response, request.model), sent=sent)
            except FailedAttempt as failed:
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

    async def _send(self, payload: bytes, headers: dict[str, str]) -> httpx.Response:
        """The response to one POST of `payload`, its body not yet read (the caller closes
        it). The request is httpx's, with the client's headers and timeouts; without a
        proxy it goes straight to the transport: the client's layers (auth, redirects,
        cookies, hooks) have nothing to do for a provider's API and cost about a twentieth
        of the bot's CPU per call under load."""
        if self._transport is None:  # a proxy: the client picks its transport per URL
            return await self._client.send(
                self._client.build_request("POST", self._url, content=payload, headers=headers),
                stream=True,
            )
        if self._client.is_closed:
            raise RuntimeError(f"{self!r} is closed")
        merged = self._client.headers.copy()
        merged.update(headers)
        timeouts = {"timeout": self._timeouts}
        request = httpx.Request(
            "POST", self._url, headers=merged, content=payload, extensions=timeouts
        )
        response = await self._transport.handle_async_request(request)
        response.request = request
        return response

    async def _attempt(self, payload: bytes, headers: dict[str, str]) -> LLMResponse:
        try:
            response = await self._send(payload, headers)
            async with contextlib.aclosing(response):
                await response.aread()
        except httpx.TimeoutException as exc:
            raise self._timed_out(exc) from exc
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from exc
        if response.is_success:
            try:
                body = response.json()
            except ValueError as exc:
                not_json = ProviderBadResponse(f"HTTP {response.status_code}: body is not JSON")
                raise FailedAttempt(not_json, kind="bad_body") from exc
            return self._mapped(self._from_response, body)
        error = self._classified(response.status_code, response.text, response.headers)
        raise failed_attempt(error, response.headers)

    async def _attempt_stream(
        self, payload: bytes, headers: dict[str, str], on_text: TextSink
    ) -> LLMResponse:
        state = self._new_stream()
        try:
            response = await self._send(payload, {**headers, "Accept": "text/event-stream"})
            async with contextlib.aclosing(response):
                if not response.is_success:
                    text = (await response.aread()).decode("utf-8", "replace")
                    error = self._classified(response.status_code, text, response.headers)
                    raise failed_attempt(error, response.headers)
                if response.headers.get("content-type", "").startswith("application/json"):
                    # a server (or proxy) that does not stream answers with the whole body
                    whole = await self._whole_body(response)
                    if whole.text:
                        await on_text(whole.text)
                    return whole
                event = ""
                data: list[str] = []
                done = False
                # Read to the body's end even after `[DONE]`: a body left unread makes httpx
                # discard the connection, and every later call pays a new TCP + TLS handshake.
                async for line in response.aiter_lines():
                    if done or line.startswith(":"):
                        continue  # past the end, or an SSE comment (OpenRouter's keep-alive)
                    if line:
                        field, _, value = line.partition(":")
                        value = value.removeprefix(" ")
                        if field == "event":
                            event = value
                        elif field == "data":
                            data.append(value)
                        continue
                    if data:
                        done = await self._dispatch(state, event, "\n".join(data), on_text)
                    event, data = "", []
                if data and not done:
                    await self._dispatch(state, event, "\n".join(data), on_text)
        except httpx.TimeoutException as exc:
            raise self._timed_out(exc) from exc
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from exc
        return self._mapped(state.result)

    async def _whole_body(self, response: httpx.Response) -> LLMResponse:
        try:
            body = json.loads(await response.aread())
        except ValueError as exc:
            not_json = ProviderBadResponse(f"HTTP {response.status_code}: body is not JSON")
            raise FailedAttempt(not_json, kind="bad_body") from exc
        return self._mapped(self._from_response, body)

    async def _dispatch(
        self, state: ResponseStream, event: str, raw: str, on_text: TextSink
    ) -> bool:
        """Feed one SSE event; True at the end of the stream (`[DONE]`)."""
        if raw.strip() == "[DONE]":
            return True
        try:
            data = json.loads(raw)
        except ValueError as exc:
            broken = ProviderBadResponse("a stream event is not JSON")
            raise FailedAttempt(broken, kind="bad_body") from exc
        if not isinstance(data, dict):
            not_object = ProviderBadResponse("a stream event is not an object")
            raise FailedAttempt(not_object, kind="bad_body")
        if self._mapped(state.feed, event, data):
            await on_text(state.text)
        return False

    def _mapped(self, step: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """Run a wire step; its errors become failed attempts of the right kind."""
        try:
            return step(*args, **kwargs)
        except ProviderBadResponse as exc:
            unmapped = ProviderBadResponse(scrub(str(exc), self._api_key))
            raise FailedAttempt(unmapped, kind="bad_body") from None
        except ProviderError as exc:
            raise failed_attempt(scrubbed(exc, self._api_key), None) from None

    def _timed_out(self, exc: Exception) -> FailedAttempt:
        message = f"no answer from {self._url} within {self._timeout:g}s"
        return FailedAttempt(ProviderUnavailable(f"{message} ({type(exc).__name__})"))

    def _unreachable(self, exc: Exception) -> FailedAttempt:
        message = scrub(f"cannot reach {self._url}: {type(exc).__name__}: {exc}", self._api_key)
        return FailedAttempt(ProviderUnavailable(message))

    def _classified(
        self, status: int, text: str, headers: Mapping[str, str] | None
    ) -> ProviderError:
        """The error branch of a response, read from the provider's own words (a short key
        must not break a phrase), its message scrubbed of the key afterwards."""
        return scrubbed(classify_error(status, text, headers), self._api_key)


def _json_body(payload: dict[str, Any]) -> bytes:
    """The body as httpx's `json=` would encode it (UTF-8, no spaces, no NaN)."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def _tagged(response: LLMResponse, model: str) -> LLMResponse:
    """`response` with its reasoning tagged with the model it was asked of (the name as
    requested: a provider may answer with a dated id), so a signed form goes back to it only."""
    if response.reasoning is None:
        return response
    return replace(response, reasoning=replace(response.reasoning, model=model))


__all__ = ["DEFAULT_MAX_RETRY_AFTER", "OpenAIProvider", "ResponseStream"]

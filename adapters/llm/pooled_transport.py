"""The model calls' HTTP transport: httpx requests (its client sets the headers, keeps the
cookies, decodes the body) sent over aiohttp's connection pool (`AiohttpTransport`).

httpcore's pool spends about 1 ms of CPU per call under load (it probes every idle
connection's socket on every request and closes an idle one whenever more than 20 are
open), aiohttp about 0.2 ms. When a proxy is set in the environment (`HTTPS_PROXY` and the
like), httpx's own transport is used, as it honours them; `NO_PROXY` alone sets no proxy.
An idle connection is kept a minute, or as long as the provider says it keeps it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ssl
import urllib.request
from collections.abc import AsyncIterator, Iterator

import aiohttp
import httpx
import yarl
from multidict import CIMultiDict


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The TLS settings every provider client shares (httpx's defaults: certifi's bundle, or
    SSL_CERT_FILE / SSL_CERT_DIR): made once per process, as reading the CA bundle costs
    about 15 ms of CPU each time, and a context serves any number of connections."""
    return httpx.create_ssl_context()


_MAX_CONNECTIONS = 100
_KEEPALIVE_SECONDS = 60.0
"""How long an idle pooled connection is kept: a quiet chat's next call (often more than
httpx's 5 s later) reuses it rather than paying a new TCP + TLS handshake. A provider that
says its own (`Keep-Alive: timeout=N`) is followed (`_keepalive_of`): the pool lets a
connection go a second before the server would."""
_HEADERS_AIOHTTP_ADDS = ("Accept", "Accept-Encoding", "User-Agent", "Content-Type")
"""Headers aiohttp would add when a request lacks them: httpx's request has what it sends."""


class AiohttpTransport(httpx.AsyncBaseTransport):
    """httpx requests sent over one aiohttp session (made on first use, in the running loop;
    a new one when a call comes from another loop). Sent as httpx built them: the same
    method, URL, headers and body; the response goes back to httpx undecoded (it decodes a
    `Content-Encoding` itself). aiohttp's errors become httpx's, so callers see one tree."""

    def __init__(self, ssl_context: ssl.SSLContext) -> None:
        self._ssl = ssl_context
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _session_here(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop:
            connector = aiohttp.TCPConnector(
                limit=_MAX_CONNECTIONS, ssl=self._ssl, keepalive_timeout=_KEEPALIVE_SECONDS
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                auto_decompress=False,
                skip_auto_headers=_HEADERS_AIOHTTP_ADDS,
                cookie_jar=aiohttp.DummyCookieJar(),  # httpx's client keeps the cookies
            )
            self._loop = loop
        return self._session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        session = self._session_here()
        limits = request.extensions.get("timeout", {})
        timeout = aiohttp.ClientTimeout(
            total=None,
            connect=limits.get("pool"),
            sock_connect=limits.get("connect"),
            sock_read=limits.get("read"),
        )
        headers = CIMultiDict(
            (name.decode("latin-1"), value.decode("latin-1")) for name, value in request.headers.raw
        )
        body = await request.aread()
        with _httpx_errors(request):
            response = await session.request(
                request.method,
                yarl.URL(str(request.url), encoded=True),
                headers=headers,
                data=body or None,
                allow_redirects=False,
                timeout=timeout,
            )
        keep_alive = response.headers.get("Keep-Alive")  # most providers send none
        said = _keepalive_of(keep_alive) if keep_alive else None
        connector = session.connector
        if said is not None and isinstance(connector, aiohttp.TCPConnector):
            # aiohttp reads its keep-alive from this attribute on every release
            connector._keepalive_timeout = min(_KEEPALIVE_SECONDS, said)
        return httpx.Response(
            response.status,
            headers=list(response.raw_headers),
            stream=_AiohttpBody(request, response),
            extensions={
                "http_version": _http_version(response.version),
                "reason_phrase": (response.reason or "").encode("latin-1", "replace"),
            },
        )

    async def aclose(self) -> None:
        session, loop = self._session, self._loop
        self._session = self._loop = None
        if session is not None and loop is asyncio.get_running_loop():
            await session.close()  # a session of a finished loop went with it


def _keepalive_of(header: str) -> float | None:
    """How long the server keeps an idle connection, from `Keep-Alive: timeout=N`, less a
    second (so the pool never reuses one the server is closing); None when it does not say."""
    for part in header.split(","):
        name, _, value = part.partition("=")
        if name.strip().lower() == "timeout":
            try:
                seconds = float(value.strip())
            except ValueError:
                return None
            return max(1.0, seconds - 1.0)
    return None


def _http_version(version: aiohttp.HttpVersion | None) -> bytes:
    return b"HTTP/1.1" if version is None else f"HTTP/{version.major}.{version.minor}".encode()


class _AiohttpBody(httpx.AsyncByteStream):
    """A response body as aiohttp reads it; closing it early drops the connection."""

    def __init__(self, request: httpx.Request, response: aiohttp.ClientResponse) -> None:
        self._request = request
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _httpx_errors(self._request):
            async for chunk in self._response.content.iter_any():
                yield chunk

    async def aclose(self) -> None:
        self._response.release()


@contextlib.contextmanager
def _httpx_errors(request: httpx.Request) -> Iterator[None]:
    """aiohttp's errors as the httpx errors its own transport raises for the same failure."""
    try:
        yield
    except aiohttp.ConnectionTimeoutError as exc:  # connecting, or waiting for a free one
        raise httpx.ConnectTimeout(str(exc) or type(exc).__name__, request=request) from exc
    except TimeoutError as exc:  # aiohttp's read timeout is one too
        raise httpx.ReadTimeout(str(exc) or type(exc).__name__, request=request) from exc
    except aiohttp.ClientConnectorError as exc:
        raise httpx.ConnectError(str(exc), request=request) from exc
    except aiohttp.ClientError as exc:  # a dropped connection, a broken body
        raise httpx.RemoteProtocolError(str(exc) or type(exc).__name__, request=request) from exc


def pooled_transport(transport: httpx.AsyncBaseTransport | None) -> httpx.AsyncBaseTransport | None:
    """`transport`, or aiohttp's pool when nothing asks for httpx's own (a test's transport,
    a proxy in the environment)."""
    # NO_PROXY alone (`no` in the table) names hosts to reach directly: no proxy is set
    proxies = {scheme for scheme in urllib.request.getproxies() if scheme != "no"}
    if transport is not None or proxies:
        return transport
    return AiohttpTransport(tls_context())

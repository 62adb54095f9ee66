"""What keeps idle or slow connections from starving the bot's process (the webhook and
the dashboard run inside it, beside every chat).

- a connection must deliver a request's headers within `HEADER_TIMEOUT_S` of opening (or of
  its previous response): aiohttp's keep-alive timer, which also runs before the first
  request, closes it otherwise (a slow-headers client included);
- a request body must arrive within `BODY_TIMEOUT_S` (408 otherwise);
- each server holds at most `MAX_CONNECTIONS` connections; one more is closed at once;
- what an attacker can repeat (a refused connection, asyncio's "Too many open files")
  is logged at most once per `LOG_EVERY_S` per message, with the count it stood for;
- `raise_file_limit` lifts the process's open-file limit to its hard limit at start-up.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections.abc import Awaitable, Callable

from aiohttp import web

HEADER_TIMEOUT_S = 10.0
BODY_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 256
LOG_EVERY_S = 10.0

logger = logging.getLogger(__name__)

_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class RateLimitedLog(logging.Filter):
    """Lets one record per (logger, message template) through every `every_s` seconds;
    the next one that passes says how many were held back."""

    def __init__(self, every_s: float = LOG_EVERY_S) -> None:
        super().__init__()
        self.every_s = every_s
        self._last: dict[tuple[str, str], float] = {}
        self._held: dict[tuple[str, str], int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, str(record.msg))
        now = time.monotonic()
        last = self._last.get(key)
        if last is not None and now - last < self.every_s:
            self._held[key] = self._held.get(key, 0) + 1
            return False
        self._last[key] = now
        held = self._held.pop(key, 0)
        if held:
            record.msg = f"{record.msg} (and {held} more like it in the last {self.every_s:g}s)"
        return True


class Throttle:
    """At most one `allow()` per `every_s` seconds; `held` counts the refused ones since."""

    def __init__(self, every_s: float = LOG_EVERY_S) -> None:
        self.every_s = every_s
        self.held = 0
        self._last: float | None = None

    def allow(self) -> bool:
        now = time.monotonic()
        if self._last is not None and now - self._last < self.every_s:
            self.held += 1
            return False
        self._last = now
        return True


LOG_LIMIT = RateLimitedLog()
_LIMITED_LOGGERS = ("asyncio", "aiohttp.server", "aiohttp.access", __name__)


def limit_repeated_logs() -> None:
    """Rate-limit the loggers a flood of connections writes to (idempotent)."""
    for name in _LIMITED_LOGGERS:
        target = logging.getLogger(name)
        if LOG_LIMIT not in target.filters:
            target.addFilter(LOG_LIMIT)


def raise_file_limit() -> int:
    """Raise the soft open-file limit to the hard one; returns the limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:
            logger.warning("could not raise the open-file limit from %s: %s", soft, exc)
    return soft


Gate = Callable[[web.Request], web.StreamResponse | None]
"""Decides from a request's line and headers alone: a response refuses it before its body
is read (a wrong secret answers at once, whatever body is still trickling in); None lets
it through."""


def body_deadline(gate: Gate | None = None) -> Callable[..., Awaitable[web.StreamResponse]]:
    """A middleware that asks `gate` first, then reads a request's body within
    `BODY_TIMEOUT_S` (cached for the handler), or answers 408."""

    @web.middleware
    async def read_body(request: web.Request, handler: _Handler) -> web.StreamResponse:
        if gate is not None and (refused := gate(request)) is not None:
            return refused
        if request.can_read_body:
            try:
                async with asyncio.timeout(BODY_TIMEOUT_S):
                    await request.read()
            except TimeoutError:
                raise web.HTTPRequestTimeout(text="the request body took too long\n") from None
        return await handler(request)

    return read_body


def guarded_runner(
    app: web.Application, *, shutdown_timeout: float, gate: Gate | None = None
) -> web.AppRunner:
    """An `AppRunner` for `app` with the header deadline and the body deadline (after
    `gate`, which sees only the request line and headers)."""
    app.middlewares.insert(0, body_deadline(gate))
    limit_repeated_logs()
    return web.AppRunner(
        app,
        access_log=None,
        shutdown_timeout=shutdown_timeout,
        keepalive_timeout=HEADER_TIMEOUT_S,
    )


class _Refused(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.close()


class GuardedSite(web.TCPSite):
    """A `TCPSite` that holds at most `max_connections` connections of its runner."""

    def __init__(
        self, runner: web.AppRunner, host: str, port: int, *, max_connections: int = MAX_CONNECTIONS
    ) -> None:
        super().__init__(runner, host, port)
        self.max_connections = max_connections
        self.refused = 0

    def _protocol(self) -> asyncio.BaseProtocol:
        server = self._runner.server
        assert server is not None
        if len(server.connections) >= self.max_connections:
            self.refused += 1
            logger.warning(
                "refusing a connection on %s: %d open, the cap", self.name, self.max_connections
            )
            return _Refused()
        return server()

    async def start(self) -> None:
        self._runner._reg_site(self)  # what BaseSite.start does
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._protocol,
            self._host,
            self._port,
            backlog=self._backlog,
            reuse_address=self._reuse_address,
            reuse_port=self._reuse_port,
        )
        sockets = self._server.sockets
        self._bound_port = sockets[0].getsockname()[1] if sockets else self._port

"""Webhook mode for `tgbot run --webhook`: an aiohttp app that feeds Telegram updates to the
dispatcher the way the poller does, as a batch of one (`polling_loop.handle_batch`), so a
new message reaches the inbound service's `on_messages` as a polled one does (several
workers can sit behind one load balancer).

Routes:
- `POST /webhook` — one Telegram update. With a secret set, a request whose
  `X-Telegram-Bot-Api-Secret-Token` differs is refused (401) from its headers, before any
  of its body is read, and its connection closed. The answer comes only after
  the update was handled (the message is stored; the turn runs in the background), so the
  order in which one chat's updates are answered is the order they are stored in; a
  transient error (the database busy or away) is retried as the poller retries it, and
  when it persists the answer is 500, and Telegram sends the update again.
  A JSON object that aiogram cannot validate as an update (an older or newer Bot API shape)
  is logged with its `update_id`, reported to `on_skipped`, and answered 200: Telegram would
  otherwise send it again and again. A body that is not a JSON object answers 400.
- `GET /healthz` — 200 while serving, 503 once shutting down (take the worker out of the pool)
  or while Telegram's `getWebhookInfo` reports recent delivery errors (the reason in `status`).

Stopping (`WebhookServer.stop`) refuses new work first, then lets requests in flight finish;
the caller drains running turns afterwards.
"""

from __future__ import annotations

import asyncio
import hmac
import logging

from aiogram import Bot, Dispatcher
from aiohttp import web

from adapters.http_guard import GuardedSite, Throttle, guarded_runner
from adapters.telegram.polling_loop import handle_batch, validate_updates
from adapters.telegram.skipped_updates import SkipHook, report_skipped
from adapters.telegram.update_health import UpdateHealth
from bot.context.bounded_json import loads_bounded

log = logging.getLogger(__name__)
WEBHOOK_PATH = "/webhook"
HEALTH_PATH = "/healthz"
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
SHUTDOWN_TIMEOUT_SECONDS = 30.0
"""How long requests in flight may take to finish once stopping (Telegram waits ~60 s)."""


class WebhookServer:
    """Serves the webhook and the health check on `host:port` (port 0: any free port)."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        bot: Bot,
        *,
        secret: str | None,
        host: str = "127.0.0.1",
        port: int = 8080,
        on_skipped: SkipHook | None = None,
        health: UpdateHealth | None = None,
    ) -> None:
        self._dispatcher = dispatcher
        self._health = health
        self._on_skipped = on_skipped
        self._bot = bot
        self._secret = secret
        self._unauthenticated = Throttle()
        """Wrong-secret requests: anyone can send them, so one log line per 10 s."""
        self._host = host
        self._port = port
        self._stopping = False
        self._runner: web.AppRunner | None = None
        self.app = web.Application()
        self.app.router.add_post(WEBHOOK_PATH, self._on_update)
        self.app.router.add_get(HEALTH_PATH, self._on_health)

    @property
    def port(self) -> int:
        """The bound port (after `start`)."""
        if self._runner is None or not self._runner.addresses:
            raise RuntimeError("the webhook server is not started")
        return int(self._runner.addresses[0][1])

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}{WEBHOOK_PATH}"

    async def start(self) -> None:
        self._runner = guarded_runner(
            self.app, shutdown_timeout=SHUTDOWN_TIMEOUT_SECONDS, gate=self._refuse_unauthenticated
        )
        await self._runner.setup()
        await GuardedSite(self._runner, self._host, self._port).start()
        log.info("webhook listening on %s (health: %s)", self.url, HEALTH_PATH)

    async def stop(self) -> None:
        """Refuse new updates, finish the requests in flight, close the listener."""
        self._stopping = True
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _on_health(self, request: web.Request) -> web.Response:
        if self._stopping:
            return web.json_response({"ok": False, "status": "stopping"}, status=503)
        deaf = self._health.stalled() if self._health is not None else None
        if deaf is not None:  # Telegram reports it cannot deliver (adapters.telegram.webhook_watch)
            return web.json_response({"ok": False, "status": deaf}, status=503)
        return web.json_response({"ok": True})

    def _refuse_unauthenticated(self, request: web.Request) -> web.Response | None:
        """401 for a webhook request without our secret, decided from its headers before
        any of its body is read (a trickled body cannot hold the connection)."""
        if request.path != WEBHOOK_PATH or self._secret is None:
            return None
        if hmac.compare_digest(
            request.headers.get(SECRET_HEADER, "").encode(), self._secret.encode()
        ):
            return None
        if self._unauthenticated.allow():
            held, self._unauthenticated.held = self._unauthenticated.held, 0
            log.warning(
                "webhook request with a wrong secret token from %s (%d more not logged)",
                request.remote,
                held,
            )
        # the unread body would be read to reuse the connection: close it instead
        return web.json_response({"ok": False}, status=401, headers={"Connection": "close"})

    async def _on_update(self, request: web.Request) -> web.Response:
        if (refused := self._refuse_unauthenticated(request)) is not None:
            return refused
        if self._stopping:  # Telegram retries; another worker will take it
            return web.json_response({"ok": False, "status": "stopping"}, status=503)
        try:
            data = loads_bounded(await request.text())  # 200,000 `[` is a 400, not a crash
        except ValueError as exc:
            log.warning("webhook request is not JSON: %s", exc)
            return web.json_response({"ok": False}, status=400)
        if not isinstance(data, dict):
            log.warning("webhook request is not a JSON object")
            return web.json_response({"ok": False}, status=400)
        updates, skipped = validate_updates([data], self._bot)
        for update_id, reason in skipped:
            await report_skipped(self._on_skipped, update_id, reason)
        try:
            unconfirmed = await handle_batch(self._dispatcher, self._bot, updates)
        except Exception:
            log.exception("update %s failed; Telegram will send it again", data.get("update_id"))
            return web.json_response({"ok": False}, status=500)
        if unconfirmed:
            log.warning("update %s is not stored; Telegram will send it again", min(unconfirmed))
            return web.json_response({"ok": False}, status=500)
        return web.json_response({"ok": True})


async def register_webhook(
    bot: Bot, dispatcher: Dispatcher, *, url: str, secret: str | None
) -> None:
    """setWebhook with our secret and the update kinds the routers use (idempotent, so every
    worker may call it at start)."""
    await bot.set_webhook(
        url,
        secret_token=secret,
        allowed_updates=dispatcher.resolve_used_update_types(),
        drop_pending_updates=False,
    )
    log.info("webhook registered with Telegram")


async def serve_webhook(
    dispatcher: Dispatcher,
    bot: Bot,
    *,
    host: str,
    port: int,
    stop: asyncio.Event,
    secret: str | None = None,
    public_url: str | None = None,
    on_skipped: SkipHook | None = None,
    health: UpdateHealth | None = None,
) -> None:
    """Serve until `stop` is set, then stop gracefully. With `public_url` the webhook is
    registered first; it is never deleted on the way out (other workers still serve it)."""
    if secret is None:
        log.warning("WEBHOOK_SECRET is not set: anyone who finds the URL can post updates")
    server = WebhookServer(
        dispatcher, bot, secret=secret, host=host, port=port, on_skipped=on_skipped, health=health
    )
    await server.start()
    try:
        if public_url is not None:
            await register_webhook(bot, dispatcher, url=public_url, secret=secret)
        await stop.wait()
        log.info("stopping: no new updates; finishing requests in flight")
    finally:
        await server.stop()

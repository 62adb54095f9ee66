"""The machine-facing routes: `/events` (server-sent events), `/healthz`, `/metrics`, and
the package's static files (the dashboard works offline: no CDN)."""

from __future__ import annotations

import asyncio

from aiohttp import web

from bot.app.dashboard.board import HERE, budget_gauges, dashboard_of, no_bot_data
from bot.app.dashboard.metrics import CONTENT_TYPE
from bot.errors import StorageUnavailable

HEARTBEAT_SECONDS = 15.0
STATIC_TYPES = {"style.css": "text/css", "live.js": "text/javascript"}
STATIC: web.AppKey[dict[str, bytes]] = web.AppKey("static")


def static_files() -> dict[str, bytes]:
    return {name: (HERE / "static" / name).read_bytes() for name in STATIC_TYPES}


async def events(request: web.Request) -> web.StreamResponse:
    """Server-sent events: one `event:` per model call, trim or error, as they happen."""
    feed = dashboard_of(request).feed
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "X-Accel-Buffering": "no"}
    )
    await response.prepare(request)
    queue = feed.subscribe()
    try:
        await response.write(b"retry: 3000\n: connected\n\n")
        while True:
            try:
                event = await asyncio.wait_for(queue.get(), HEARTBEAT_SECONDS)
            except TimeoutError:
                await response.write(b": keep-alive\n\n")
                continue
            if event is None:
                break
            await response.write(event.sse())
    except (ConnectionResetError, ConnectionError):
        pass
    finally:
        feed.unsubscribe(queue)
    return response


async def healthz(request: web.Request) -> web.Response:
    from storage.dashboard import store_answers

    missing = await no_bot_data(request)
    if missing is not None:
        return web.Response(text=missing + "\n", status=503)
    updates = dashboard_of(request).updates
    deaf = updates.stalled() if updates is not None else None
    if deaf is not None:  # never silently deaf (adapters.telegram.update_health)
        return web.Response(text=deaf + "\n", status=503)
    if await store_answers(dashboard_of(request).engine):
        return web.Response(text="ok\n")
    return web.Response(text="the database does not answer\n", status=503)


async def metrics(request: web.Request) -> web.Response:
    from bot.app.dashboard.jobs_page import jobs_metrics
    from storage.dashboard import inbound_message_count

    dashboard = dashboard_of(request)
    try:
        inbound: int | None = await inbound_message_count(dashboard.engine)
    except StorageUnavailable:
        inbound = None
    budgets = None
    if dashboard.spend is not None:
        status = await dashboard.spend.status(dashboard.now())
        if status is not None:
            budgets = budget_gauges(dashboard.spend.policy, status)
    updates = dashboard.updates
    body = dashboard.feed.metrics.render(
        now=dashboard.now(),
        inbound_messages=inbound,
        budgets=budgets,
        last_update_age=updates.age() if updates is not None else None,
    )
    body += (await jobs_metrics(request)).encode()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})


async def static(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    files = request.app[STATIC]
    if name not in files:
        raise web.HTTPNotFound()
    return web.Response(body=files[name], content_type=STATIC_TYPES[name])

"""What stands before every page: the token check, errors as short pages, security headers."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote, urlencode

from aiohttp import web

from bot.app.dashboard.auth import (
    COOKIE_NAME,
    LINK_SECONDS,
    SESSION_SECONDS,
    is_loopback,
    matches_secret,
    sign,
    verify,
)
from bot.app.dashboard.board import Dashboard, no_bot_data, render
from bot.app.dashboard.views import BadQuery
from bot.errors import SessionNotFound, StorageUnavailable

log = logging.getLogger("tgbot.dashboard")

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


async def security_headers(request: web.Request, response: web.StreamResponse) -> None:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def errors_as_pages(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Errors become short pages; never a stack trace."""
    try:
        return await handler(request)
    except web.HTTPNotFound:
        return render(request, "error.html", status=404, title="Not found", detail="")
    except web.HTTPException:
        raise
    except BadQuery as exc:
        return render(request, "error.html", status=400, title="Bad request", detail=str(exc))
    except SessionNotFound as exc:
        return render(request, "error.html", status=404, title="Unknown chat", detail=str(exc))
    except StorageUnavailable:
        missing = await no_bot_data(request)
        if missing is not None:
            return render(request, "error.html", status=503, title=missing, detail="")
        log.exception("dashboard: the store did not answer")
        return render(
            request,
            "error.html",
            status=503,
            title="The database did not answer",
            detail="Try again in a moment.",
        )
    except Exception:
        log.exception("dashboard: %s failed", request.path)
        return render(
            request,
            "error.html",
            status=500,
            title="Something went wrong",
            detail="The server log has the details.",
        )


def host_name(host: str) -> str:
    """The name in a Host header, without its port (`[::1]:8080` → `::1`)."""
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    name, colon, port = host.rpartition(":")
    return name if colon and port.isdigit() and ":" not in name else host


def local_path(path: str) -> str:
    """`path` as a same-site redirect target: percent-encoded (a tab, a backslash or a
    line break cannot make a browser read `//other.site`) with one leading slash."""
    return "/" + quote(path, safe="/:@!$&'()*+,;=-._~").lstrip("/")


def token_check(dashboard: Dashboard) -> Any:
    token = dashboard.settings.dashboard_token
    secret = token.get_secret_value() if token is not None else None

    behind_tls = (dashboard.settings.dashboard_url or "").lower().startswith("https://")
    used_links: dict[str, float] = {}  # a `/dashboard` link works once (until it expires)

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        # the stylesheet holds nothing private, and the refusal page needs it
        if request.path in ("/healthz", "/static/style.css"):
            return await handler(request)
        if secret is None:
            # loopback without a token: a web page on another name (DNS rebinding) must
            # not read it through the operator's browser
            if not is_loopback(host_name(request.host)):
                return web.Response(status=421, text="this dashboard answers on loopback only\n")
            return await handler(request)
        now = time.time()
        header = request.headers.get("Authorization", "")
        scheme, _, offered = header.partition(" ")
        if scheme.lower() == "bearer" and matches_secret(secret, offered.strip()):
            return await handler(request)
        cookie = request.cookies.get(COOKIE_NAME)
        if cookie is not None and verify(secret, "session", cookie, now=now):
            return await handler(request)
        query = request.query.get("token")
        for spent, expiry in list(used_links.items()):
            if expiry <= now:
                del used_links[spent]
        if query is not None and (
            matches_secret(secret, query)
            or (query not in used_links and verify(secret, "link", query, now=now))
        ):
            if not matches_secret(secret, query):
                used_links[query] = now + LINK_SECONDS
            # The token leaves the address bar: the cookie carries a signed session instead.
            kept = {k: v for k, v in request.query.items() if k != "token"}
            redirect = web.HTTPSeeOther(
                local_path(request.path) + (f"?{urlencode(kept)}" if kept else "")
            )
            redirect.set_cookie(
                COOKIE_NAME,
                sign(secret, "session", int(now) + SESSION_SECONDS),
                max_age=SESSION_SECONDS,
                httponly=True,
                samesite="Strict",
                secure=request.secure or behind_tls,
                path="/",
            )
            raise redirect
        response = render(
            request,
            "error.html",
            status=401,
            title="This dashboard needs its token",
            detail="Open the link the bot's /dashboard command sends, or add "
            "?token=<DASHBOARD_TOKEN> to the address once.",
        )
        response.headers["WWW-Authenticate"] = 'Bearer realm="tgbot dashboard"'
        return response

    return check

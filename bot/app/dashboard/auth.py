"""Who may see the dashboard: the bind rule, the operator token and short-lived signed tokens.

Without `DASHBOARD_TOKEN` the server listens on loopback only. With it, a request must carry
the token (`Authorization: Bearer <token>`), or a signed token minted from it: the owner's
`/dashboard` link carries one that expires in minutes (`?token=`), and the cookie set after a
`?token=` visit carries one that lasts hours. A signed token is `<expiry>.<hmac>`, the HMAC
(SHA-256, keyed with the operator token) of its purpose and expiry, so neither the link nor
the cookie ever holds the operator token itself. Every comparison is constant-time.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import time
from collections.abc import Callable
from typing import Literal

from bot.errors import ConfigError

Purpose = Literal["link", "session"]

LINK_SECONDS = 15 * 60
"""How long the owner's `/dashboard` link works."""
SESSION_SECONDS = 12 * 3600
"""How long the cookie set after a `?token=` visit works."""
COOKIE_NAME = "tgbot_dashboard"

_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain"})


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and `localhost`."""
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, *, has_token: bool) -> None:
    """Refuse a non-loopback address when no token protects the pages (one-line error)."""
    if not has_token and not is_loopback(host):
        raise ConfigError(
            "DASHBOARD_TOKEN",
            f"required to serve the dashboard on {host}; without it, use 127.0.0.1",
        )


def sign(secret: str, purpose: Purpose, expires_at: int) -> str:
    """A token for `purpose` valid until `expires_at` (Unix seconds)."""
    return f"{expires_at}.{_mac(secret, purpose, expires_at)}"


def verify(secret: str, purpose: Purpose, token: str, *, now: float) -> bool:
    """True when `token` was signed with `secret` for `purpose` and has not expired."""
    expiry, dot, mac = token.partition(".")
    if not dot or not (expiry.isascii() and expiry.isdigit()) or len(expiry) > 12:
        return False
    expected = _mac(secret, purpose, int(expiry))
    if not hmac.compare_digest(mac.encode(), expected.encode()):
        return False
    return int(expiry) > now


def matches_secret(secret: str, offered: str) -> bool:
    """Constant-time comparison of an offered token with the operator token."""
    return hmac.compare_digest(offered.encode(), secret.encode())


def link_url(base_url: str, secret: str, *, now: float) -> str:
    """The owner's `/dashboard` link: the public URL with a token valid `LINK_SECONDS`."""
    token = sign(secret, "link", int(now) + LINK_SECONDS)
    return f"{base_url.rstrip('/')}/?token={token}"


def owner_link(base_url: str | None, secret: str | None) -> Callable[[], str] | None:
    """What the owner's `/dashboard` command links to: None without a public URL; the plain
    URL without a token (the dashboard is then on loopback: a tunnel reaches it); otherwise
    a fresh short-lived signed link each time."""
    if base_url is None:
        return None
    if secret is None:
        return lambda: base_url.rstrip("/") + "/"
    return lambda: link_url(base_url, secret, now=time.time())


def _mac(secret: str, purpose: Purpose, expires_at: int) -> str:
    digest = hmac.new(
        secret.encode(), f"tgbot-dashboard:{purpose}:{expires_at}".encode(), hashlib.sha256
    ).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()

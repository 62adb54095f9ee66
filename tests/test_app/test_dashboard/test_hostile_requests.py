"""Findings 28.6 (DNS rebinding), 28.4's "a link works once", and from 28.11: a junk
`?token=%C2%B2.x` is a 401 (was a 500), `/%09/evil.example?token=…` never redirects off the
site, and the session cookie is `Secure` when `DASHBOARD_URL` is https.

It reads the same demo data as the other dashboard tests (one demo run per session)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from pydantic import SecretStr

from bot.app.dashboard.auth import link_url
from bot.app.dashboard.server import open_dashboard
from tests.test_app.test_dashboard.conftest import DASHBOARD_SECRET, DemoData, serving

Client = TestClient[web.Request, web.Application]


@pytest.fixture
async def guarded(demo_data: DemoData) -> AsyncIterator[Client]:
    async with serving(
        open_dashboard(
            demo_data.settings(
                dashboard_token=SecretStr(DASHBOARD_SECRET),
                dashboard_url="https://bot.example.org/",
            )
        )
    ) as test_client:
        yield test_client


@pytest.fixture
async def open_loopback(demo_data: DemoData) -> AsyncIterator[Client]:
    async with serving(open_dashboard(demo_data.settings())) as test_client:
        yield test_client


@pytest.mark.parametrize(
    "host", ["rebind.attacker.example", "rebind.attacker.example:8080", "10.0.0.5", "[fe80::1]"]
)
async def test_without_a_token_only_loopback_hosts_are_served(
    open_loopback: Client, host: str
) -> None:
    refused = await open_loopback.get("/chats", headers={"Host": host})
    assert refused.status == 421
    assert "Alice" not in await refused.text()


@pytest.mark.parametrize("host", ["127.0.0.1:8080", "localhost", "[::1]:9000", "localhost:1"])
async def test_loopback_hosts_are_still_served(open_loopback: Client, host: str) -> None:
    assert (await open_loopback.get("/", headers={"Host": host})).status == 200


@pytest.mark.parametrize("token", ["%C2%B2.x", "%C2%B2%C2%B2.abc", "%D9%A3.x", "1%00.x"])
async def test_a_junk_token_is_a_401_not_a_500(guarded: Client, token: str) -> None:
    response = await guarded.get(f"/?token={token}")
    assert response.status == 401
    assert "Traceback" not in await response.text()


@pytest.mark.parametrize(
    "path", ["/%09/evil.example", "/%5C/evil.example", "/\\/evil.example",
             "/%0A/evil.example", "/%2F/evil.example"],
)  # fmt: skip
async def test_the_token_redirect_never_leaves_the_site(guarded: Client, path: str) -> None:
    response = await guarded.get(
        f"{path}?token={DASHBOARD_SECRET}", allow_redirects=False, headers={"Host": "127.0.0.1"}
    )
    assert response.status == 303
    location = response.headers["Location"]
    assert location.startswith("/")
    assert not location.startswith("//")
    assert not any(c in location for c in "\t\n\r\\")


async def test_the_cookie_is_secure_behind_tls_and_a_link_works_once(guarded: Client) -> None:
    link = link_url("https://bot.example.org/", DASHBOARD_SECRET, now=time.time())
    token = link.split("?token=")[1]
    first = await guarded.get(f"/?token={token}", allow_redirects=False)
    assert first.status == 303
    assert "Secure" in first.headers["Set-Cookie"]
    guarded.session.cookie_jar.clear()
    again = await guarded.get(f"/?token={token}", allow_redirects=False)
    assert again.status == 401

"""Who may see the dashboard: the bind rule, the token, the signed link and cookie."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from pydantic import SecretStr

from bot.app.dashboard.auth import (
    COOKIE_NAME,
    LINK_SECONDS,
    check_bind,
    is_loopback,
    link_url,
    sign,
    verify,
)
from bot.app.dashboard.server import open_dashboard
from bot.errors import ConfigError
from tests.test_app.test_dashboard.conftest import DASHBOARD_SECRET, DemoData, run_tgbot, serving

Client = TestClient[web.Request, web.Application]
BOT_SECRET = "123456:SECRET-bot-token"
KEY_SECRET = "sk-live-SECRET-key"


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.0.1", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.5", False),
        ("example.org", False),
    ],
    ids=lambda v: str(v),
)
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_an_open_host_needs_a_token() -> None:
    with pytest.raises(ConfigError, match="DASHBOARD_TOKEN: required") as caught:
        check_bind("0.0.0.0", has_token=False)
    assert "\n" not in str(caught.value)
    check_bind("0.0.0.0", has_token=True)
    check_bind("127.0.0.1", has_token=False)


@pytest.mark.slow
def test_the_command_refuses_an_open_host_in_one_line(demo_data: DemoData) -> None:
    done = run_tgbot("dashboard", "--host", "0.0.0.0", "--port", "1", env=demo_data.env())
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert "DASHBOARD_TOKEN" in done.stderr
    assert "Traceback" not in done.stderr


def test_signed_tokens_expire_and_bind_their_purpose() -> None:
    now = 1_800_000_000.0
    token = sign("k", "link", int(now) + 60)
    assert verify("k", "link", token, now=now)
    assert not verify("k", "link", token, now=now + 61)  # expired
    assert not verify("k", "session", token, now=now)  # another purpose
    assert not verify("other", "link", token, now=now)  # another key
    expiry, mac = token.split(".")
    assert not verify("k", "link", f"{int(expiry) + 999}.{mac}", now=now)  # forged expiry
    for junk in ("", ".", "abc", "1.2.3", "x.y"):
        assert not verify("k", "link", junk, now=now)


def test_the_owner_link_carries_a_short_lived_token() -> None:
    now = time.time()
    url = link_url("https://bot.example.org/dash/", DASHBOARD_SECRET, now=now)
    assert url.startswith("https://bot.example.org/dash/?token=")
    token = url.split("?token=")[1]
    assert DASHBOARD_SECRET not in url
    assert verify(DASHBOARD_SECRET, "link", token, now=now)
    assert not verify(DASHBOARD_SECRET, "link", token, now=now + LINK_SECONDS + 1)


@pytest.fixture
async def guarded(demo_data: DemoData) -> AsyncIterator[Client]:
    async with serving(
        open_dashboard(
            demo_data.settings(
                dashboard_token=SecretStr(DASHBOARD_SECRET),
                bot_token=SecretStr(BOT_SECRET),
                llm_api_key=SecretStr(KEY_SECRET),
            )
        )
    ) as test_client:
        yield test_client


async def test_every_page_but_healthz_needs_the_token(guarded: Client) -> None:
    paths = ("/", "/chats", "/chats/-1001000000777", "/events", "/metrics", "/static/live.js")
    for path in (*paths, "/calls/20260101-0123456789ab", "/chats/4242/conversation"):
        response = await guarded.get(path)
        assert response.status == 401, path
        assert "needs its token" in await response.text()
    assert (await guarded.get("/healthz")).status == 200
    wrong = await guarded.get("/", headers={"Authorization": "Bearer nope"})
    assert wrong.status == 401
    assert (await guarded.get("/", params={"token": "nope"})).status == 401


async def test_the_refusal_page_is_styled(guarded: Client) -> None:
    refused = await (await guarded.get("/chats")).text()
    assert 'href="/static/style.css"' in refused
    style = await guarded.get("/static/style.css")
    assert style.status == 200, "the refusal page's stylesheet needs no token"
    assert style.content_type == "text/css"
    assert ".panel" in await style.text()


async def test_bearer_token_opens_every_page_and_no_secret_shows(
    guarded: Client, demo_data: DemoData
) -> None:
    auth = {"Authorization": f"Bearer {DASHBOARD_SECRET}"}
    for path in ("/", "/chats", f"/chats/{demo_data.group_chat}", "/metrics", "/healthz"):
        response = await guarded.get(path, headers=auth)
        assert response.status == 200, path
        body = await response.text()
        shown = body + str(dict(response.headers))
        for secret in (DASHBOARD_SECRET, BOT_SECRET, KEY_SECRET, "SECRET"):
            assert secret not in shown, (path, secret)


async def test_a_token_in_the_address_becomes_an_httponly_cookie(guarded: Client) -> None:
    response = await guarded.get(
        "/", params={"token": DASHBOARD_SECRET, "from": "2026-01-01"}, allow_redirects=False
    )
    assert response.status == 303
    assert response.headers["Location"] == "/?from=2026-01-01"  # the token leaves the URL
    cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=Strict" in cookie
    assert DASHBOARD_SECRET not in cookie
    assert guarded.session.cookie_jar.filter_cookies(guarded.make_url("/"))[COOKIE_NAME]
    assert (await guarded.get("/chats")).status == 200  # the cookie alone opens pages now


async def test_the_owner_link_opens_the_dashboard_until_it_expires(guarded: Client) -> None:
    fresh = link_url("http://x", DASHBOARD_SECRET, now=time.time()).split("?token=")[1]
    stale = sign(DASHBOARD_SECRET, "link", int(time.time()) - 1)
    assert (await guarded.get("/", params={"token": stale})).status == 401
    response = await guarded.get("/", params={"token": fresh}, allow_redirects=False)
    assert response.status == 303
    assert (await guarded.get("/")).status == 200


async def test_the_token_redirect_stays_on_this_site(guarded: Client) -> None:
    root = str(guarded.make_url("/")).rstrip("/")
    response = await guarded.session.get(
        f"{root}//evil.example/x", params={"token": DASHBOARD_SECRET}, allow_redirects=False
    )
    assert response.status == 303
    assert response.headers["Location"] == "/evil.example/x"

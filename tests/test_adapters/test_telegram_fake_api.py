"""`FakeBotApi` speaks the Bot API wire format: errors, long polling, message state."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from testkit.fake_bot_api import FakeBotApi
from tests.deadlines import EVENT, deadline

CHAT = -1001234567890


@pytest.fixture
async def api() -> AsyncIterator[FakeBotApi]:
    async with FakeBotApi() as server:
        yield server


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def call(
    http: aiohttp.ClientSession,
    api: FakeBotApi,
    method: str,
    token: str | None = None,
    **params: Any,
) -> tuple[int, dict[str, Any]]:
    url = f"{api.base_url}/bot{token or api.token}/{method}"
    async with http.post(url, json=params) as response:
        body: dict[str, Any] = await response.json()
        return response.status, body


async def test_unknown_methods_and_wrong_tokens_fail_like_telegram(
    api: FakeBotApi, http: aiohttp.ClientSession
) -> None:
    assert await call(http, api, "sendTelepathy") == (
        404,
        {"ok": False, "error_code": 404, "description": "Not Found"},
    )
    status, body = await call(http, api, "getMe", token="42:WRONG")
    assert (status, body["description"]) == (401, "Unauthorized")


async def test_long_poll_wakes_when_an_update_is_pushed(
    api: FakeBotApi, http: aiohttp.ClientSession
) -> None:
    poll = asyncio.create_task(call(http, api, "getUpdates", timeout=30))
    await api.wait_for_call("getUpdates")
    update_id = api.push_update(api.user_message(CHAT, 1001, "hi"))
    status, body = await asyncio.wait_for(poll, deadline(EVENT))
    assert status == 200
    assert [u["update_id"] for u in body["result"]] == [update_id]
    _, again = await call(http, api, "getUpdates", offset=update_id + 1, timeout=0)
    assert again["result"] == []


async def test_stop_releases_a_pending_long_poll(http: aiohttp.ClientSession) -> None:
    api = FakeBotApi()
    await api.start()
    poll = asyncio.create_task(call(http, api, "getUpdates", timeout=30))
    await api.wait_for_call("getUpdates")
    await api.stop()
    _, body = await asyncio.wait_for(poll, deadline(EVENT))
    assert body == {"ok": True, "result": []}


async def test_getupdates_honours_limit_and_allowed_updates(
    api: FakeBotApi, http: aiohttp.ClientSession
) -> None:
    for n in range(3):
        api.push_update(api.user_message(CHAT, 1001, f"m{n}"))
    api.push_update({"callback_query": {"id": "1", "from": {"id": 1, "is_bot": False,
                    "first_name": "A"}, "chat_instance": "1"}})  # fmt: skip
    _, body = await call(http, api, "getUpdates", limit=2)
    assert [u["message"]["text"] for u in body["result"]] == ["m0", "m1"]
    _, body = await call(http, api, "getUpdates", offset=3, allowed_updates=["message"])
    assert [u["message"]["text"] for u in body["result"]] == ["m2"]


async def test_a_webhook_blocks_getupdates(api: FakeBotApi, http: aiohttp.ClientSession) -> None:
    assert (await call(http, api, "setWebhook", url="https://example.org/hook"))[0] == 200
    status, body = await call(http, api, "getUpdates")
    assert status == 409
    assert body["description"].startswith("Conflict: can't use getUpdates")
    _, info = await call(http, api, "getWebhookInfo")
    assert info["result"]["url"] == "https://example.org/hook"
    await call(http, api, "deleteWebhook")
    assert (await call(http, api, "getUpdates"))[0] == 200


async def test_messages_replies_edits_and_bad_requests(
    api: FakeBotApi, http: aiohttp.ClientSession
) -> None:
    first = api.user_message(CHAT, {"id": 1001, "first_name": "Alice"}, "/ask@test_bot hi @bob_b")
    first_id = first["message"]["message_id"]
    assert first["message"]["entities"] == [
        {"offset": 0, "length": 13, "type": "bot_command"},
        {"offset": 17, "length": 6, "type": "mention"},
    ]
    _, sent = await call(
        http, api, "sendMessage", chat_id=CHAT, text="answer", reply_to_message_id=first_id
    )
    message = sent["result"]
    assert message["message_id"] == first_id + 1
    assert message["reply_to_message"]["text"] == "/ask@test_bot hi @bob_b"
    _, edited = await call(
        http, api, "editMessageText", chat_id=CHAT, message_id=message["message_id"], text="v2"
    )
    assert (edited["result"]["text"], "edit_date" in edited["result"]) == ("v2", True)
    assert api.sent_messages(CHAT)[0]["text"] == "v2"
    status, body = await call(
        http, api, "sendMessage", chat_id=CHAT, text="x", reply_parameters={"message_id": 999}
    )
    assert (status, body["description"]) == (400, "Bad Request: message to be replied not found")
    status, body = await call(http, api, "sendMessage", chat_id=CHAT, text="x" * 4097)
    assert (status, body["description"]) == (400, "Bad Request: message is too long")
    for method in ("sendChatAction", "setMyCommands", "close", "logOut"):
        assert (await call(http, api, method, chat_id=CHAT, action="typing", commands=[]))[0] == 200


async def test_injected_failures_carry_retry_after(
    api: FakeBotApi, http: aiohttp.ClientSession
) -> None:
    api.fail_next("getMe", error_code=429, description="Too Many Requests: retry after 7",
                  retry_after=7, times=2)  # fmt: skip
    for _ in range(2):
        status, body = await call(http, api, "getme")
        assert (status, body["parameters"]) == (429, {"retry_after": 7})
    assert (await call(http, api, "getMe"))[0] == 200
    assert len(await api.wait_for_call("getMe", count=3)) == 3

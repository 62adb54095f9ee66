"""Issue 50, items 8 and 12: the pooled model connection survives a quiet chat.

A chat quiet for more than httpx's 5 s keep-alive used to reopen the connection (a new TCP
and TLS handshake per call); `NO_PROXY` alone (no proxy set) used to switch the model calls
off the pooled transport. Against the fake OpenAI server, which counts the connections.
"""

from __future__ import annotations

import asyncio

import pytest

from adapters.llm import pooled_transport
from adapters.llm.openai_provider import OpenAIProvider
from adapters.llm.scripted import ScriptedModel
from bot.domain.messages import ChatMessage
from bot.ports import LLMRequest
from testkit.fake_server import FakeOpenAIServer

QUIET_SECONDS = 6.0
"""Longer than httpx's 5 s keep-alive: the chat was quiet that long between two calls."""
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy")


def ask(text: str) -> LLMRequest:
    return LLMRequest(model="m", messages=(ChatMessage(role="user", content=text),))


@pytest.mark.parametrize("no_proxy", [None, "localhost,127.0.0.1"], ids=["plain", "no_proxy"])
async def test_a_quiet_chat_reuses_its_connection(
    monkeypatch: pytest.MonkeyPatch, no_proxy: str | None
) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    if no_proxy is not None:
        monkeypatch.setenv("NO_PROXY", no_proxy)
    async with (
        FakeOpenAIServer(ScriptedModel()) as server,
        OpenAIProvider(server.base_url, "k", max_retries=0) as provider,
    ):
        await provider.complete(ask("first"))
        await asyncio.sleep(QUIET_SECONDS)
        await provider.complete(ask("after a quiet while"))
    assert len(server.requests) == 2
    assert len(server.peers) == 1


def test_the_providers_keep_alive_is_followed() -> None:
    """A server that says how long it keeps an idle connection: the pool lets it go a
    second earlier, never reusing one the server is closing."""
    keepalive_of = pooled_transport._keepalive_of
    assert keepalive_of("timeout=20, max=100") == 19.0
    assert keepalive_of("max=100") is None
    assert keepalive_of("") is None

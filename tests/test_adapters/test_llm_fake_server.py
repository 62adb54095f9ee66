"""FakeOpenAIServer over real HTTP on 127.0.0.1, driven by OpenAIProvider."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest

from adapters.llm.openai_provider import OpenAIProvider
from adapters.llm.openai_wire import to_request
from adapters.llm.scripted import CallTool, Fail, Reply, ScriptedModel
from bot.domain.messages import ChatMessage, ToolCall
from bot.errors import ContextOverflow, ProviderRateLimited, ProviderUnavailable
from bot.ports import LLMRequest, ToolSpec
from testkit.fake_server import FakeOpenAIServer

TOOLS = (ToolSpec(name="delete_message", description="Delete.", parameters={"type": "object"}),)
REQUEST = LLMRequest(
    model="fake-model",
    messages=(
        ChatMessage(role="system", content="Be brief."),
        ChatMessage(role="user", content="[id:m4;user_id:7;]\ndelete m2", tokens=12),
    ),
    tools=TOOLS,
)


class Sleeps(list[float]):
    async def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
async def server() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer(ScriptedModel()) as running:
        yield running


def provider_for(server: FakeOpenAIServer, **options: object) -> OpenAIProvider:
    return OpenAIProvider(server.base_url, "sk-fake", **options)  # type: ignore[arg-type]


async def test_a_tool_turn_round_trips_over_http(server: FakeOpenAIServer) -> None:
    scripted = ScriptedModel([CallTool("delete_message", {"message_id": "m2"}), Reply("Deleted.")])
    server.model = scripted
    async with provider_for(server) as provider:
        first = await provider.complete(REQUEST)
        assert first.tool_calls == (
            ToolCall(id="call_1", name="delete_message", arguments='{"message_id":"m2"}'),
        )
        assert first.finish_reason == "tool_calls"
        follow_up = LLMRequest(
            model="fake-model",
            messages=(
                *REQUEST.messages,
                ChatMessage(role="assistant", tool_calls=first.tool_calls),
                ChatMessage(role="tool", tool_call_id="call_1", content="done"),
            ),
            tools=TOOLS,
        )
        second = await provider.complete(follow_up)
    assert second.text == "Deleted."
    assert second.usage is not None
    assert second.usage.cached_tokens % 64 == 0
    assert server.requests == [to_request(REQUEST), to_request(follow_up)]
    assert scripted.requests[0].messages[1] == ChatMessage(
        role="user", content="[id:m4;user_id:7;]\ndelete m2"
    )
    assert scripted.requests[1].messages[-1].name == "delete_message"
    assert scripted.requests[0].tools == TOOLS


async def test_injected_429_is_retried_after_its_retry_after(server: FakeOpenAIServer) -> None:
    server.fail_next(429, {"error": {"message": "slow down"}}, {"Retry-After": "2"})
    sleeps = Sleeps()
    async with provider_for(server, sleep=sleeps) as provider:
        response = await provider.complete(REQUEST)
    assert response.text.startswith("Noted: delete m2")
    assert sleeps == [2.0]
    assert len(server.requests) == 2


async def test_injected_503s_outlast_the_retries(server: FakeOpenAIServer) -> None:
    server.fail_next(503, "upstream down", times=3)
    async with provider_for(server, sleep=Sleeps(), max_retries=2) as provider:
        with pytest.raises(ProviderUnavailable, match="upstream down"):
            await provider.complete(REQUEST)
    assert len(server.requests) == 3


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (ContextOverflow("131204 tokens"), ContextOverflow),
        (ProviderRateLimited("quota", retry_after=600), ProviderRateLimited),
        (ProviderUnavailable("down"), ProviderUnavailable),
    ],
    ids=["overflow", "rate-limited-long", "unavailable"],
)
async def test_delegate_errors_become_provider_http_errors(
    server: FakeOpenAIServer, error: Exception, expected: type[Exception]
) -> None:
    server.model = ScriptedModel([Fail(error)] * 5)
    async with provider_for(server, sleep=Sleeps(), max_retries=1) as provider:
        with pytest.raises(expected):
            await provider.complete(REQUEST)


async def test_a_slow_answer_times_out(server: FakeOpenAIServer) -> None:
    server.delay_next(30)
    async with provider_for(server, timeout=0.2, max_retries=0) as provider:
        with pytest.raises(ProviderUnavailable, match=r"within 0\.2s"):
            await provider.complete(REQUEST)


async def test_a_request_that_is_not_json_is_refused_and_recorded(
    server: FakeOpenAIServer,
) -> None:
    async with httpx.AsyncClient() as client:
        response = await client.post(f"{server.base_url}/chat/completions", content=b"{oops")
        models = await client.get(f"{server.base_url}/models")
    assert response.status_code == 400
    assert server.requests == [{"invalid_json": "{oops"}]
    assert json.loads(models.content)["data"][0]["id"] == "fake-model"


async def test_base_url_needs_a_started_server() -> None:
    with pytest.raises(RuntimeError):
        _ = FakeOpenAIServer().base_url

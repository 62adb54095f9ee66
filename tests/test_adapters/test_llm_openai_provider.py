"""OpenAIProvider over httpx.MockTransport: transport, retries, error mapping, key hygiene."""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.llm.dialects import WireOptions
from adapters.llm.openai_provider import OpenAIProvider
from adapters.llm.openai_wire import to_request
from bot.domain.messages import ChatMessage
from bot.errors import (
    ContextOverflow,
    ProviderBadResponse,
    ProviderError,
    ProviderRateLimited,
    ProviderRejected,
    ProviderUnavailable,
)
from bot.ports import LLMRequest, ToolSpec

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "llm"
KEY = "sk-test-0123456789abcdefSECRET"
BASE = "https://llm.example/v1"
REQUEST = LLMRequest(model="gpt-4o", messages=(ChatMessage(role="user", content="hi"),))


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


OK = fixture("openai_text.json")
OVERFLOW = fixture("openai_context_overflow.json")
RATE_LIMIT = fixture("rate_limit_429.json")

Answer = httpx.Response | Exception


class Server:
    """A MockTransport handler that plays `answers` in order and records every request."""

    def __init__(self, answers: Iterable[Answer]) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


def ok() -> httpx.Response:
    return httpx.Response(200, json=OK)


def status(code: int, body: Any = None, headers: dict[str, str] | None = None) -> httpx.Response:
    if isinstance(body, str):
        return httpx.Response(code, text=body, headers=headers)
    return httpx.Response(code, json=body if body is not None else {}, headers=headers)


class Sleeps(list[float]):
    async def __call__(self, seconds: float) -> None:
        self.append(seconds)


MakeProvider = Callable[..., tuple[OpenAIProvider, Server, Sleeps]]


@pytest.fixture
async def make_provider() -> Any:
    made: list[OpenAIProvider] = []

    def make(*answers: Answer, **options: Any) -> tuple[OpenAIProvider, Server, Sleeps]:
        server, sleeps = Server(answers), Sleeps()
        options.setdefault("rng", random.Random(1))
        options.setdefault("api_key", KEY)
        provider = OpenAIProvider(
            BASE, transport=httpx.MockTransport(server), sleep=sleeps, **options
        )
        made.append(provider)
        return provider, server, sleeps

    yield make
    for provider in made:
        await provider.aclose()


async def test_posts_the_wire_body_with_the_bearer_key(make_provider: MakeProvider) -> None:
    provider, server, sleeps = make_provider(ok())
    response = await provider.complete(REQUEST)
    assert response.text == "We moved the meeting to Friday at 10:00."
    (sent,) = server.requests
    assert sent.method == "POST"
    assert str(sent.url) == "https://llm.example/v1/chat/completions"
    assert sent.headers["Authorization"] == f"Bearer {KEY}"
    assert json.loads(sent.content) == to_request(REQUEST)
    assert sleeps == []


async def test_the_tool_schemas_sent_are_the_request_s_own_call_after_call(
    make_provider: MakeProvider,
) -> None:
    """The tools' JSON is kept per tool set and spliced into the body: every body still
    reads as `to_request` writes it, for the same set again, another set, and a profile
    whose `extra_body` sets `tools` itself."""
    search = ToolSpec(name="search", description="Find 消息", parameters={"type": "object"})
    remind = ToolSpec(name="remind", description="Remind someone", parameters=None)
    first, second = (search, remind), (remind,)
    requests = [replace(REQUEST, tools=tools) for tools in (first, first, second, first, ())]
    provider, server, _ = make_provider(ok())
    for request in requests:
        await provider.complete(request)
    for request, sent in zip(requests, server.requests, strict=True):
        assert json.loads(sent.content) == to_request(request)
    extra = WireOptions(extra_body={"tools": [{"type": "web_search"}]})
    custom, custom_server, _ = make_provider(ok(), options=extra)
    await custom.complete(requests[0])
    (sent,) = custom_server.requests
    assert json.loads(sent.content) == to_request(requests[0], extra)
    assert json.loads(sent.content)["tools"] == [{"type": "web_search"}]


async def test_without_a_key_sends_no_authorization(make_provider: MakeProvider) -> None:
    provider, server, _ = make_provider(ok(), api_key=None)
    await provider.complete(REQUEST)
    assert "Authorization" not in server.requests[0].headers


async def test_429_with_retry_after_waits_that_long_then_succeeds(
    make_provider: MakeProvider,
) -> None:
    provider, server, sleeps = make_provider(
        status(429, RATE_LIMIT["body"], RATE_LIMIT["headers"]), ok()
    )
    assert (await provider.complete(REQUEST)).text
    assert len(server.requests) == 2
    assert sleeps == [7.0]


async def test_retry_after_ms_is_honoured(make_provider: MakeProvider) -> None:
    provider, _, sleeps = make_provider(status(429, {}, {"retry-after-ms": "300"}), ok())
    await provider.complete(REQUEST)
    assert sleeps == [0.3]


async def test_retry_after_beyond_the_max_wait_gives_up_at_once(
    make_provider: MakeProvider,
) -> None:
    provider, server, sleeps = make_provider(status(429, {}, {"Retry-After": "120"}), ok())
    with pytest.raises(ProviderRateLimited) as caught:
        await provider.complete(REQUEST)
    assert caught.value.retry_after == 120.0
    assert len(server.requests) == 1
    assert sleeps == []


async def test_429_without_retry_after_uses_backoff_and_raises_rate_limited(
    make_provider: MakeProvider,
) -> None:
    provider, server, sleeps = make_provider(status(429), max_retries=2)
    with pytest.raises(ProviderRateLimited):
        await provider.complete(REQUEST)
    assert len(server.requests) == 3
    assert len(sleeps) == 2


@pytest.mark.parametrize("max_retries", [0, 1, 3])
async def test_503_every_time_raises_unavailable_after_max_retries_plus_one(
    make_provider: MakeProvider, max_retries: int
) -> None:
    provider, server, sleeps = make_provider(
        status(503, {"error": {"message": "overloaded"}}), max_retries=max_retries
    )
    with pytest.raises(ProviderUnavailable, match="HTTP 503: overloaded"):
        await provider.complete(REQUEST)
    assert len(server.requests) == max_retries + 1
    assert len(sleeps) == max_retries


async def test_backoff_grows_exponentially_with_jitter_and_is_capped(
    make_provider: MakeProvider,
) -> None:
    provider, _, sleeps = make_provider(
        status(500), max_retries=6, backoff_base=0.5, backoff_max=4.0
    )
    with pytest.raises(ProviderUnavailable):
        await provider.complete(REQUEST)
    ceilings = [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert all(c / 2 <= s <= c for s, c in zip(sleeps, ceilings, strict=True))


async def test_jitter_is_deterministic_with_a_seeded_random(make_provider: MakeProvider) -> None:
    runs = []
    for _ in range(2):
        provider, _, sleeps = make_provider(status(502), rng=random.Random(42))
        with pytest.raises(ProviderUnavailable):
            await provider.complete(REQUEST)
        runs.append(list(sleeps))
    assert runs[0] == runs[1]
    assert len(set(runs[0])) == 3


async def test_503_with_retry_after_is_honoured(make_provider: MakeProvider) -> None:
    provider, _, sleeps = make_provider(status(503, "busy", {"Retry-After": "3"}), ok())
    await provider.complete(REQUEST)
    assert sleeps == [3.0]


async def test_context_overflow_is_not_retried(make_provider: MakeProvider) -> None:
    provider, server, sleeps = make_provider(status(400, OVERFLOW["body"]), ok())
    with pytest.raises(ContextOverflow, match="maximum context length"):
        await provider.complete(REQUEST)
    assert len(server.requests) == 1
    assert sleeps == []


async def test_other_4xx_is_not_retried(make_provider: MakeProvider) -> None:
    provider, server, _ = make_provider(
        status(400, {"error": {"message": "Invalid value for 'temperature'"}}), ok()
    )
    with pytest.raises(ProviderRejected, match="temperature"):
        await provider.complete(REQUEST)
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    "failure",
    [httpx.ReadTimeout("slow"), httpx.ConnectTimeout("slow"), httpx.ConnectError("refused")],
    ids=["read-timeout", "connect-timeout", "connect-error"],
)
async def test_timeouts_and_network_errors_are_retried(
    make_provider: MakeProvider, failure: Exception
) -> None:
    provider, server, sleeps = make_provider(failure, ok())
    assert (await provider.complete(REQUEST)).text
    assert len(server.requests) == 2
    assert len(sleeps) == 1


async def test_timeouts_every_time_raise_unavailable_from_the_httpx_error(
    make_provider: MakeProvider,
) -> None:
    provider, server, _ = make_provider(httpx.ReadTimeout("slow"), max_retries=2, timeout=5)
    with pytest.raises(ProviderUnavailable, match="within 5s") as caught:
        await provider.complete(REQUEST)
    assert isinstance(caught.value.__cause__, httpx.ReadTimeout)
    assert len(server.requests) == 3


async def test_a_body_that_is_not_json_is_retried_once(make_provider: MakeProvider) -> None:
    provider, server, _ = make_provider(httpx.Response(200, text="{trunc"), ok())
    assert (await provider.complete(REQUEST)).text
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    "bad",
    [
        httpx.Response(200, text="<html>"),
        httpx.Response(200, json={"choices": [{"message": {"content": ""}}]}),
    ],
    ids=["not-json", "empty-reply"],
)
async def test_a_bad_body_twice_raises_bad_response(
    make_provider: MakeProvider, bad: httpx.Response
) -> None:
    provider, server, _ = make_provider(bad)
    with pytest.raises(ProviderBadResponse):
        await provider.complete(REQUEST)
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    "answer",
    [
        status(401, {"error": {"message": f"Incorrect API key provided: {KEY}"}}),
        status(500, f"upstream said Authorization: Bearer {KEY}"),
        status(429, {"error": {"message": f"key {KEY} is over quota"}}),
        httpx.Response(200, json={"choices": [{"message": {"content": 3, "k": KEY}}]}),
        httpx.ConnectError("connection refused"),
    ],
    ids=["401-echo", "500-echo", "429-echo", "bad-body", "network-error"],
)
async def test_the_key_never_appears_in_errors_or_logs(
    make_provider: MakeProvider, answer: Answer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    provider, _, _ = make_provider(answer, max_retries=1)
    with pytest.raises(ProviderError) as caught:
        await provider.complete(REQUEST)
    if isinstance(answer, httpx.Response) and answer.status_code != 200:
        assert "***" in str(caught.value)
    error: BaseException | None = caught.value
    while error is not None:
        assert KEY not in str(error)
        assert KEY not in repr(error)
        assert KEY not in repr(error.args)
        error = error.__cause__ or error.__context__
    assert KEY not in caplog.text
    assert KEY not in repr(provider)


async def test_async_context_manager_closes_the_client() -> None:
    server = Server([ok()])
    async with OpenAIProvider(BASE, KEY, transport=httpx.MockTransport(server)) as provider:
        await provider.complete(REQUEST)
    with pytest.raises(RuntimeError):
        await provider.complete(REQUEST)


async def test_a_short_key_does_not_hide_an_overflow_and_is_still_scrubbed() -> None:
    body = {"error": {"message": "Your request exceeded model token limit (k)", "type": "x"}}
    server = Server([httpx.Response(400, json=body)])
    transport = httpx.MockTransport(server)
    async with OpenAIProvider(BASE, "k", transport=transport, max_retries=0) as provider:
        with pytest.raises(ContextOverflow) as caught:
            await provider.complete(REQUEST)
    assert "token" not in str(caught.value)  # the key "k" is scrubbed from the message
    assert "***" in str(caught.value)

"""The real adapters against fake servers that behave like each provider, over HTTP on
127.0.0.1: wire validation, usage in the provider's shape, cache reads and writes consistent
with the breakpoints sent, SSE streaming, errors mid-stream."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest

from adapters.llm.anthropic_provider import AnthropicProvider
from adapters.llm.openai_provider import OpenAIProvider
from adapters.llm.provider_defaults import options_for
from adapters.llm.scripted import CallTool, Reply, ScriptedModel
from bot.app.model_routes import build_provider, build_routes
from bot.config import ProviderProfile, load_settings
from bot.domain.messages import CachePlan, ChatMessage
from bot.errors import (
    ConfigError,
    ContextOverflow,
    ProviderRejected,
    ProviderUnavailable,
)
from bot.ports import LLMRequest, ToolSpec, Usage
from testkit.fake_anthropic import FakeAnthropicServer
from testkit.fake_server import FakeOpenAIServer

KEY = "sk-ant-test-key"
SYSTEM = ChatMessage(role="system", content="You are the group's bot. " * 40)
TOOLS = (ToolSpec(name="search", description="Search.", parameters={"type": "object"}),)


def turn(history: list[ChatMessage], question: str, *, model: str = "m") -> LLMRequest:
    """A request whose plan marks the system prompt and the last stable message (the one
    before the current message), the way the request builder does."""
    messages = (SYSTEM, *history, ChatMessage(role="user", content=question + "\n[per-turn]"))
    last_stable = len(messages) - 2 if history else None
    return LLMRequest(
        model=model,
        messages=messages,
        tools=TOOLS,
        max_output_tokens=200,
        cache_plan=CachePlan(system_end=0, last_stable=last_stable, session_key="tg:1"),
    )


class Drafts(list[str]):
    async def __call__(self, text: str) -> None:
        self.append(text)


@pytest.fixture
async def anthropic() -> AsyncIterator[FakeAnthropicServer]:
    async with FakeAnthropicServer(ScriptedModel(), api_key=KEY) as running:
        yield running


def usage_tuple(usage: Usage | None) -> tuple[int, int, int, int]:
    assert usage is not None
    return (usage.input_tokens, usage.output_tokens, usage.cached_tokens, usage.cache_write_tokens)


async def three_turns(provider: OpenAIProvider, *, stream: bool = False) -> list[Usage | None]:
    history: list[ChatMessage] = []
    usages = []
    for question in ("first question", "second question", "third question"):
        request = turn(history, question)
        drafts = Drafts()
        response = await provider.complete(request, on_text=drafts if stream else None)
        if stream:
            assert drafts
            assert drafts[-1] == response.text
        usages.append(response.usage)
        history += [
            ChatMessage(role="user", content=question),
            ChatMessage(role="assistant", content=response.text),
        ]
    return usages


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_anthropic_usage_equals_what_the_server_reported(
    anthropic: FakeAnthropicServer, stream: bool
) -> None:
    async with AnthropicProvider(anthropic.base_url, KEY) as provider:
        usages = await three_turns(provider, stream=stream)
    assert [usage_tuple(u) for u in usages] == [usage_tuple(u) for u in anthropic.reported]
    first, second, third = usages
    assert first is not None
    assert second is not None
    assert third is not None
    assert first.cache_write_tokens > 0
    assert first.cached_tokens == 0
    # the second turn reads the system prompt the first wrote, and writes its stable tail
    assert second.cached_tokens >= first.cache_write_tokens
    assert second.cache_write_tokens > 0
    assert third.cached_tokens > second.cached_tokens
    headers = anthropic.headers[0]
    assert headers["x-api-key"] == KEY
    assert headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in headers
    assert all(body.get("stream", False) is stream for body in anthropic.requests)


async def test_anthropic_tool_call_streams_and_round_trips(anthropic: FakeAnthropicServer) -> None:
    anthropic.model = ScriptedModel([CallTool("search", {"q": "日本"}), Reply("Found it.")])
    request = turn([], "find it")
    async with AnthropicProvider(anthropic.base_url, KEY) as provider:
        called = await provider.complete(request, on_text=Drafts())
        assert called.tool_calls[0].name == "search"
        assert json.loads(called.tool_calls[0].arguments) == {"q": "日本"}
        follow = LLMRequest(
            model="m",
            messages=(
                *request.messages,
                ChatMessage(role="assistant", tool_calls=called.tool_calls),
                ChatMessage(role="tool", content="a hit", tool_call_id=called.tool_calls[0].id),
            ),
            tools=TOOLS,
        )
        answer = await provider.complete(follow)
    assert answer.text == "Found it."
    assert anthropic.requests[1]["messages"][-1]["content"][0]["type"] == "tool_result"


async def test_the_fake_anthropic_refuses_what_the_api_refuses(
    anthropic: FakeAnthropicServer,
) -> None:
    base = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    marked = {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}
    five = {**base, "system": [marked] * 5}
    wrong_order = {
        **base,
        "system": [
            {**marked, "cache_control": {"type": "ephemeral"}},
            {**marked, "cache_control": {"type": "ephemeral", "ttl": "1h"}},
        ],
    }
    no_max = {k: v for k, v in base.items() if k != "max_tokens"}
    headers = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
    url = anthropic.base_url + "/v1/messages"
    async with httpx.AsyncClient() as client:
        missing_version = await client.post(url, json=base, headers={"x-api-key": KEY})
        wrong_key = await client.post(url, json=base, headers={**headers, "x-api-key": "no"})
        too_many = await client.post(url, json=five, headers=headers)
        order = await client.post(url, json=wrong_order, headers=headers)
        unbounded = await client.post(url, json=no_max, headers=headers)
        fine = await client.post(url, json=base, headers=headers)
    assert missing_version.status_code == 400
    assert "anthropic-version" in missing_version.json()["error"]["message"]
    assert wrong_key.status_code == 401
    assert too_many.status_code == 400
    assert "maximum of 4 blocks" in too_many.json()["error"]["message"]
    assert order.status_code == 400
    assert unbounded.status_code == 400
    assert fine.status_code == 200
    assert fine.json()["usage"]["cache_read_input_tokens"] == 0


async def test_anthropic_overflow_and_overload(anthropic: FakeAnthropicServer) -> None:
    anthropic.fail_next(
        529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    )
    async with AnthropicProvider(anthropic.base_url, KEY, max_retries=0) as provider:
        with pytest.raises(ProviderUnavailable, match="Overloaded"):
            await provider.complete(turn([], "q"))
    from adapters.llm.scripted import Fail

    anthropic.model = ScriptedModel([Fail(ContextOverflow("too long"))])
    async with AnthropicProvider(anthropic.base_url, KEY, max_retries=0) as provider:
        with pytest.raises(ContextOverflow, match="prompt is too long"):
            await provider.complete(turn([], "q"))


async def test_openrouter_cache_writes_equal_what_the_server_reported() -> None:
    async with FakeOpenAIServer(ScriptedModel(), cache="breakpoints") as server:
        options = options_for("https://openrouter.ai/api/v1")
        async with OpenAIProvider(server.base_url, "k", options=options) as provider:
            usages = await three_turns(provider, stream=True)
    assert [usage_tuple(u) for u in usages] == [usage_tuple(u) for u in server.reported]
    assert sum(u.cache_write_tokens for u in usages if u) > 0
    assert usages[-1] is not None
    assert usages[-1].cached_tokens > 0
    for body in server.requests:
        assert body["stream"] is True
        assert body["stream_options"] == {"include_usage": True}
        assert isinstance(body["messages"][-1]["content"], str)  # never a marker there


async def test_no_max_tokens_where_the_profile_says_max_completion_tokens() -> None:
    async with FakeOpenAIServer(ScriptedModel()) as server:
        profile = ProviderProfile(
            base_url=server.base_url, model="gpt-5-mini", max_tokens_param="max_completion_tokens"
        )
        async with build_provider(profile, "k", timeout=5, max_retries=0) as provider:
            await provider.complete(turn([], "q", model="gpt-5-mini"))
        # the fake refuses max_tokens for this model, as OpenAI does
        wrong = ProviderProfile(
            base_url=server.base_url, model="gpt-5-mini", max_tokens_param="max_tokens"
        )
        async with build_provider(wrong, "k", timeout=5, max_retries=0) as provider:
            with pytest.raises(ProviderRejected, match="Unsupported parameter"):
                await provider.complete(turn([], "q", model="gpt-5-mini"))
    assert "max_tokens" not in server.requests[0]
    assert server.requests[0]["max_completion_tokens"] == 200


async def test_wiring_picks_the_adapter_by_kind() -> None:
    anthropic = build_provider(
        ProviderProfile(base_url="https://api.deepseek.com/anthropic", kind="anthropic"),
        "k",
        timeout=5,
        max_retries=0,
    )
    openai = build_provider(
        ProviderProfile(base_url="https://api.x.ai/v1"), "k", timeout=5, max_retries=0
    )
    try:
        assert isinstance(anthropic, AnthropicProvider)
        assert anthropic.url == "https://api.deepseek.com/anthropic/v1/messages"
        assert type(openai) is OpenAIProvider
        assert openai.options.conversation_header == "x-grok-conv-id"
    finally:
        await anthropic.aclose()
        await openai.aclose()


@pytest.mark.parametrize(
    ("base_url", "kind", "adapter"),
    [
        ("https://api.anthropic.com", None, AnthropicProvider),
        ("https://api.deepseek.com/anthropic/", None, AnthropicProvider),
        ("https://api.deepseek.com", None, OpenAIProvider),
        ("https://api.anthropic.com", "openai", OpenAIProvider),
    ],
    ids=["anthropic-host", "anthropic-path", "other", "kind-wins"],
)
async def test_an_unset_kind_is_read_from_the_url(
    tmp_path: Path, base_url: str, kind: str | None, adapter: type[OpenAIProvider]
) -> None:
    """`LLM_KIND` (or a profile's `kind`) unset: Anthropic's host or a `/anthropic` path
    speaks the Messages API, anything else chat completions; a set kind wins."""
    settings = load_settings(
        data_dir=tmp_path,
        llm_base_url=base_url,
        llm_kind=kind,
        providers={"p": {"base_url": base_url, **({"kind": kind} if kind else {})}},
    )
    routes = build_routes(settings)
    try:
        for name in ("default", "p"):
            assert type(routes.resolve(name).provider) is adapter, name
    finally:
        await routes.aclose()


async def test_xai_conversation_header_and_openai_prompt_cache_key() -> None:
    async with FakeOpenAIServer(ScriptedModel()) as server:
        xai = options_for("https://api.x.ai/v1")
        async with OpenAIProvider(server.base_url, "k", options=xai) as provider:
            await provider.complete(turn([], "q"))
        openai = options_for("https://api.openai.com/v1")
        async with OpenAIProvider(server.base_url, "k", options=openai) as provider:
            await provider.complete(turn([], "q"))
    assert server.headers[0]["x-grok-conv-id"] == "tg:1"
    assert "prompt_cache_key" not in server.requests[0]
    assert server.requests[1]["prompt_cache_key"] == "tg:1"
    assert "x-grok-conv-id" not in server.headers[1]


async def test_openai_stream_with_tool_calls_and_usage() -> None:
    scripted = ScriptedModel(
        [(Reply("Let me look that up for you."), CallTool("search", {"q": "x"}))]
    )
    async with (
        FakeOpenAIServer(scripted) as server,
        OpenAIProvider(server.base_url, "k") as provider,
    ):
        drafts = Drafts()
        streamed = await provider.complete(turn([], "q"), on_text=drafts)
    assert streamed.text == "Let me look that up for you."
    assert drafts == sorted(drafts, key=len)
    assert len(drafts) > 1
    assert drafts[-1] == streamed.text
    assert streamed.tool_calls[0].name == "search"
    assert json.loads(streamed.tool_calls[0].arguments) == {"q": "x"}
    assert usage_tuple(streamed.usage) == usage_tuple(server.reported[0])


def sse(*events: str) -> httpx.Response:
    return httpx.Response(200, text="".join(events), headers={"content-type": "text/event-stream"})


async def test_errors_mid_stream_map_to_the_provider_error_tree() -> None:
    openrouter = sse(
        'data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n',
        ": OPENROUTER PROCESSING\n\n",
        'data: {"error":{"code":400,"message":"prompt is too long: 210000 tokens > 200000'
        ' maximum"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}\n\n',
    )
    anthropic = sse(
        'event: message_start\ndata: {"type":"message_start","message":{"usage":'
        '{"input_tokens":5,"output_tokens":1}}}\n\n',
        'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
        '"message":"Overloaded"}}\n\n',
    )
    drafts = Drafts()
    transport = httpx.MockTransport(lambda _: openrouter)
    async with OpenAIProvider("https://x/v1", "k", transport=transport) as provider:
        with pytest.raises(ContextOverflow):
            await provider.complete(turn([], "q"), on_text=drafts)
    assert drafts == ["Hel"]
    transport = httpx.MockTransport(lambda _: anthropic)
    async with AnthropicProvider("https://x", "k", transport=transport, max_retries=0) as provider:
        with pytest.raises(ProviderUnavailable, match="Overloaded"):
            await provider.complete(turn([], "q"), on_text=Drafts())


async def test_a_profile_that_does_not_stream_ignores_on_text() -> None:
    async with FakeOpenAIServer(ScriptedModel()) as server:
        options = options_for(server.base_url, stream=False)
        async with OpenAIProvider(server.base_url, "k", options=options) as provider:
            drafts = Drafts()
            response = await provider.complete(turn([], "q"), on_text=drafts)
    assert response.text
    assert drafts == []
    assert "stream" not in server.requests[0]


async def test_env_and_toml_routes_pick_kind_and_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "bot.toml"
    config.write_text(
        '[providers.claude]\nbase_url = "https://api.anthropic.com"\nkind = "anthropic"\n'
        'cache_ttl = "1h"\nmodel = "claude-sonnet-4-5"\n'
        '[providers.router]\nbase_url = "https://openrouter.ai/api/v1"\ncache = "off"\n',
        encoding="utf-8",
    )
    monkeypatch.setenv("LLM_BASE_URL", "https://api.deepseek.com/anthropic")
    monkeypatch.setenv("LLM_KIND", "anthropic")
    monkeypatch.setenv("LLM_CACHE", "auto")
    monkeypatch.setenv("LLM_CACHE_TTL", "1h")
    routes = build_routes(load_settings(config))
    try:
        default = routes.resolve("default").provider
        claude = routes.resolve("claude").provider
        router = routes.resolve("router").provider
        assert isinstance(default, AnthropicProvider)
        assert default.options.cache == "auto"
        assert default.options.cache_ttl == "1h"
        assert isinstance(claude, AnthropicProvider)
        assert claude.options.cache == "breakpoints"
        assert claude.options.cache_ttl == "1h"
        assert type(router) is OpenAIProvider
        assert not router.options.marks_breakpoints
    finally:
        await routes.aclose()
    monkeypatch.setenv("LLM_CACHE", "sometimes")
    with pytest.raises(ConfigError, match="LLM_CACHE"):
        load_settings()


async def test_a_server_that_ignores_stream_still_answers() -> None:
    body = json.loads((Path(__file__).parents[1] / "fixtures/llm/openai/usage.json").read_text())
    transport = httpx.MockTransport(lambda _: httpx.Response(200, json=body["body"]))
    drafts = Drafts()
    async with OpenAIProvider("https://x/v1", "k", transport=transport) as provider:
        response = await provider.complete(turn([], "q"), on_text=drafts)
    assert response.text == "Done."
    assert drafts == ["Done."]
    assert usage_tuple(response.usage) == (12480, 64, 10240, 1920)


OVERFLOWS = sorted((Path(__file__).parents[1] / "fixtures" / "llm").glob("*/overflow*.json"))


@pytest.mark.parametrize("path", OVERFLOWS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_overflow_reaches_the_caller_as_context_overflow_at_once(path: Path) -> None:
    """Through the real adapter: no retry, the reactive recovery gets `ContextOverflow`."""
    fixture = json.loads(path.read_text(encoding="utf-8"))
    asyncio.run(_overflow_once(path, fixture))


async def _overflow_once(path: Path, fixture: Any) -> None:
    calls: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(fixture["status"], json=fixture["body"])

    kind = AnthropicProvider if path.parent.name == "anthropic" else OpenAIProvider
    transport = httpx.MockTransport(answer)
    async with kind("https://x/v1", KEY, transport=transport) as provider:
        with pytest.raises(ContextOverflow):
            await provider.complete(turn([], "q"))
    assert len(calls) == 1


@pytest.mark.parametrize("shape", ["openai", "deepseek", "moonshot"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_automatic_cache_usage_in_each_providers_shape(
    shape: Literal["openai", "deepseek", "moonshot"], stream: bool
) -> None:
    async with FakeOpenAIServer(ScriptedModel(), cache="auto", usage_shape=shape) as server:
        provider = OpenAIProvider(server.base_url, "sk-long-enough-key")
        try:
            usages = await three_turns(provider, stream=stream)
        finally:
            await provider.aclose()
    assert [usage_tuple(u) for u in usages] == [usage_tuple(u) for u in server.reported]
    assert usages[-1] is not None
    assert usages[-1].cached_tokens > 0
    assert all(u is not None and u.cache_write_tokens == 0 for u in usages)


async def test_anthropic_automatic_mode_writes_what_is_never_read(
    anthropic: FakeAnthropicServer,
) -> None:
    """Automatic mode marks the newest block, which carries the per-turn blocks: each turn
    writes, the next cannot read it; our breakpoints read the stable prefix back."""
    auto = options_for("https://api.anthropic.com", kind="anthropic", cache="auto")
    async with AnthropicProvider(anthropic.base_url, KEY, options=auto) as provider:
        automatic = await three_turns(provider)
    assert all("cache_control" in body for body in anthropic.requests)
    anthropic.prompt_cache = type(anthropic.prompt_cache)(mode="breakpoints")
    async with AnthropicProvider(anthropic.base_url, KEY) as provider:
        planned = await three_turns(provider)
    assert sum(u.cached_tokens for u in automatic if u) == 0
    assert sum(u.cache_write_tokens for u in automatic if u) > 0
    assert sum(u.cached_tokens for u in planned if u) > 0


async def test_empty_messages_never_become_empty_anthropic_blocks(
    anthropic: FakeAnthropicServer,
) -> None:
    request = LLMRequest(
        model="m",
        messages=(
            ChatMessage(role="system", content=""),
            ChatMessage(role="user", content="hi"),
            ChatMessage(role="assistant", content=""),
            ChatMessage(role="user", content="again"),
        ),
    )
    async with AnthropicProvider(anthropic.base_url, KEY, max_retries=0) as provider:
        response = await provider.complete(request)
    assert response.text
    async with httpx.AsyncClient() as client:
        refused = await client.post(
            anthropic.base_url + "/v1/messages",
            json={
                "model": "m",
                "max_tokens": 5,
                "system": [{"type": "text", "text": ""}],
                "messages": [{"role": "user", "content": "x"}],
            },
            headers={"x-api-key": KEY, "anthropic-version": "2023-06-01"},
        )
    assert refused.status_code == 400


async def test_the_fake_anthropic_refuses_an_unanswered_tool_use(
    anthropic: FakeAnthropicServer,
) -> None:
    use = {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {}}
    body = {
        "model": "m",
        "max_tokens": 5,
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [{"type": "text", "text": "no result"}]},
        ],
    }
    async with httpx.AsyncClient() as client:
        refused = await client.post(
            anthropic.base_url + "/v1/messages",
            json=body,
            headers={"x-api-key": KEY, "anthropic-version": "2023-06-01"},
        )
    assert refused.status_code == 400
    assert "tool_result" in refused.json()["error"]["message"]


async def test_the_fakes_refuse_a_tool_choice_the_apis_refuse() -> None:
    """OpenAI: a tool_choice without tools, or not one of its values; Anthropic: a
    tool_choice that is not an object of a known type, or that names no offered tool."""
    tool = {"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}
    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    anthropic_base = {**chat, "max_tokens": 10}
    anthropic_tool = {"name": "search", "input_schema": {"type": "object"}}
    headers = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
    async with (
        FakeOpenAIServer(ScriptedModel()) as openai,
        FakeAnthropicServer(ScriptedModel(), api_key=KEY) as claude,
        httpx.AsyncClient() as client,
    ):
        url = openai.base_url + "/chat/completions"
        alone = await client.post(url, json={**chat, "tool_choice": "none"})
        unknown = await client.post(url, json={**chat, "tools": [tool], "tool_choice": "never"})
        fine = await client.post(url, json={**chat, "tools": [tool], "tool_choice": "none"})
        messages = claude.base_url + "/v1/messages"
        as_string = await client.post(
            messages, json={**anthropic_base, "tool_choice": "none"}, headers=headers
        )
        bad_type = await client.post(
            messages,
            json={**anthropic_base, "tools": [anthropic_tool], "tool_choice": {"type": "never"}},
            headers=headers,
        )
        no_such = await client.post(
            messages,
            json={
                **anthropic_base,
                "tools": [anthropic_tool],
                "tool_choice": {"type": "tool", "name": "other"},
            },
            headers=headers,
        )
        none = await client.post(
            messages,
            json={**anthropic_base, "tools": [anthropic_tool], "tool_choice": {"type": "none"}},
            headers=headers,
        )
    assert alone.status_code == 400
    assert alone.json()["error"]["param"] == "tool_choice"
    assert "only allowed when 'tools' are specified" in alone.json()["error"]["message"]
    assert unknown.status_code == 400
    assert unknown.json()["error"]["code"] == "invalid_value"
    assert fine.status_code == 200
    for refused in (as_string, bad_type, no_such):
        assert refused.status_code == 400
        assert refused.json()["type"] == "error"
        assert "tool_choice" in refused.json()["error"]["message"]
    assert none.status_code == 200


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_under_tool_choice_none_the_fakes_never_answer_a_tool_call(
    kind: Literal["openai", "anthropic"],
) -> None:
    scripted = ScriptedModel([(Reply("From what I have: no."), CallTool("search", {"q": "x"}))])
    request = LLMRequest(
        model="m",
        messages=(SYSTEM, ChatMessage(role="user", content="anything?")),
        tools=TOOLS,
        tool_choice="none",
        max_output_tokens=50,
    )
    server: FakeOpenAIServer
    if kind == "openai":
        server = FakeOpenAIServer(scripted)
    else:
        server = FakeAnthropicServer(scripted, api_key=KEY)
    async with server:
        provider: OpenAIProvider = (
            OpenAIProvider(server.base_url, None, max_retries=0)
            if kind == "openai"
            else AnthropicProvider(server.base_url, KEY, max_retries=0)
        )
        async with provider:
            response = await provider.complete(request)
    assert response.tool_calls == ()
    assert response.text == "From what I have: no."


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_one_connection_serves_every_call_to_a_model(stream: bool) -> None:
    """A streamed body is read to its end, so httpx keeps the connection for the next call
    (a body left unread after `[DONE]` made every call open a new TCP + TLS connection)."""
    async with FakeOpenAIServer(ScriptedModel()) as server:
        provider = OpenAIProvider(server.base_url, "k")
        async with provider:
            for _ in range(3):
                await three_turns(provider, stream=stream)
    assert len(server.requests) == 9
    assert len(server.peers) == 1


async def test_one_connection_serves_every_streamed_call_to_anthropic(
    anthropic: FakeAnthropicServer,
) -> None:
    async with AnthropicProvider(anthropic.base_url, KEY) as provider:
        await three_turns(provider, stream=True)
        await three_turns(provider, stream=True)
    assert len(anthropic.requests) == 6
    assert len(anthropic.peers) == 1


async def test_reasoning_is_tagged_with_the_model_it_was_asked_of() -> None:
    """The tag is the name the route asked for, the one the next request of this chat names
    (so the signature goes back to it), whatever id the provider answers with."""
    from testkit.fake_reasoning import ClaudeThinking

    thinking = ClaudeThinking()
    model = ScriptedModel([CallTool("search", {"q": "x"})])
    async with FakeAnthropicServer(model, api_key=KEY, thinking=thinking) as server:
        options = options_for(server.base_url, kind="anthropic", reasoning="high")
        async with AnthropicProvider(server.base_url, KEY, options=options) as provider:
            response = await provider.complete(turn([], "q", model="claude-opus-4-7"))
    assert response.reasoning is not None
    assert response.reasoning.format == "anthropic"
    assert response.reasoning.model == "claude-opus-4-7"


async def test_what_goes_on_the_wire_and_how_a_broken_connection_ends() -> None:
    """Over the real transport: the request carries httpx's headers once each (whatever pool
    sends it); a refused connection and a body cut short are an unavailable provider (retried
    like any network failure), never a hang or a raw transport error."""
    heads: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(
            next(h for h in head.lower().split(b"\r\n") if h.startswith(b"content-length")).split(
                b":"
            )[1]
        )
        await reader.readexactly(length)
        heads.append(head)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{"
        )
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server, OpenAIProvider(f"http://127.0.0.1:{port}/v1", KEY, max_retries=0) as cut:
        for on_text in (None, Drafts()):
            with pytest.raises(ProviderUnavailable, match="cannot reach") as caught:
                await cut.complete(turn([], "q"), on_text=on_text)
            assert isinstance(caught.value.__cause__, httpx.TransportError)
    assert len(heads) == 2
    lines = [line.lower() for line in heads[0].split(b"\r\n")]
    names = [line.split(b":")[0] for line in lines[1:] if line]
    assert sorted(names) == sorted(set(names)), "a header sent twice"
    assert b"content-type: application/json" in lines
    assert f"authorization: bearer {KEY}".encode() in lines
    assert any(line.startswith(b"user-agent: python-httpx/") for line in lines)
    async with OpenAIProvider(f"http://127.0.0.1:{port}/v1", KEY, max_retries=0) as refused:
        with pytest.raises(ProviderUnavailable, match="cannot reach") as caught:
            await refused.complete(turn([], "q"))
    assert isinstance(caught.value.__cause__, httpx.ConnectError)


async def test_a_proxy_in_the_environment_carries_the_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`HTTP_PROXY` / `HTTPS_PROXY` are honoured: the call goes to the proxy, addressed to
    the provider's URL."""
    body = json.loads((Path(__file__).parents[1] / "fixtures/llm/openai/usage.json").read_text())
    answer = json.dumps(body["body"]).encode()
    targets: list[bytes] = []

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        targets.append(head.split(b"\r\n")[0])
        length = next(h for h in head.lower().split(b"\r\n") if h.startswith(b"content-length"))
        await reader.readexactly(int(length.split(b":")[1]))
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
            % len(answer)
            + answer
        )
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(proxy, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")
    async with server, OpenAIProvider("http://llm.invalid/v1", KEY, max_retries=0) as provider:
        response = await provider.complete(turn([], "q"))
    assert response.text == "Done."
    assert targets == [b"POST http://llm.invalid/v1/chat/completions HTTP/1.1"]

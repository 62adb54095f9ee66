"""A fake OpenAI-compatible server on 127.0.0.1 for end-to-end tests, backed by any LLMProvider.

`FakeOpenAIServer` speaks `POST /v1/chat/completions` over real HTTP: it records each raw
request body, maps it to an `LLMRequest` with `openai_server_wire.from_request`, asks the delegate
(a `ScriptedModel` by default) and answers with `testkit.openai_answers.to_response`. Errors the
delegate raises come back as the HTTP errors a real provider sends (overflow → 400
`context_length_exceeded`, rate limit → 429 with `Retry-After`, unavailable → 503, a bad
response → an empty reply). `fail_next` and `delay_next` inject failures and slowness;
`answer_next` serves a recorded body verbatim.

It validates what OpenAI rejects (`max_tokens` for GPT-5-family and o-series models, 400
`unsupported_parameter`; more than 4 `cache_control` parts, which OpenRouter's Anthropic
upstreams refuse; a `tool_choice` without `tools` or of an unknown value), never answers a
tool call under `tool_choice: "none"`, streams SSE chunks when asked (`stream: true`, the
usage in a last chunk with `stream_options.include_usage`), and with `cache` set reports
usage from `fake_cache.PrefixCache` (`reported` keeps each usage it sent). With `thinking`
(`testkit.fake_reasoning`) it answers with reasoning, streamed as reasoning deltas, and
refuses with the provider's own 400 a request that does not give it back.

Run alone with `python -m testkit.fake_server [--port N]` (the demo model answers).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any, Literal, Self

from aiohttp import web

from adapters.llm.openai_server_wire import from_request
from adapters.llm.scripted import ScriptedModel
from bot.errors import ContextOverflow, ProviderBadResponse, ProviderError, ProviderRateLimited
from bot.ports import LLMProvider, LLMRequest, LLMResponse, Usage
from testkit.fake_cache import Block, PrefixCache
from testkit.fake_reasoning import Refusal, ThinkingModel
from testkit.openai_answers import error_body, to_response

_COMPLETION_ONLY = ("gpt-5", "o1", "o3", "o4")
"""Models that reject `max_tokens` (they take `max_completion_tokens`)."""
_MARKERS = ("cache_control", "prompt_cache_breakpoint")


@dataclass(frozen=True, slots=True)
class _Injected:
    status: int
    body: Mapping[str, Any] | str
    headers: Mapping[str, str] = field(default_factory=dict)


class FakeOpenAIServer:
    """An aiohttp server on 127.0.0.1 (a free port unless `port` is given)."""

    def __init__(
        self,
        model: LLMProvider | None = None,
        *,
        port: int = 0,
        delay: float = 0.0,
        model_name: str = "fake-model",
        cache: Literal["none", "auto", "breakpoints"] = "none",
        usage_shape: Literal["openai", "deepseek", "moonshot"] = "openai",
        thinking: ThinkingModel | None = None,
    ) -> None:
        self.model: LLMProvider = model if model is not None else ScriptedModel()
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        """The headers of each request, lower-cased names."""
        self.reported: list[Usage | None] = []
        """The usage each answer reported, in order."""
        self.peers: set[object] = set()
        """The client addresses requests came from: one per TCP connection a client opened."""
        self.cache = PrefixCache(mode=cache) if cache != "none" else None
        self.usage_shape = usage_shape
        """Whose usage fields the answers carry: OpenAI's `prompt_tokens_details`,
        DeepSeek's `prompt_cache_hit/miss_tokens` (with the nested zero newer responses also
        carry) or Moonshot's top-level `cached_tokens`."""
        self.delay = delay
        """Seconds every answer waits (after `delay_next` delays are used up)."""
        self.piece_delay = 0.0
        """Seconds between the streamed pieces of an answer's text (a model writing slowly,
        for the live drafts a reply earns only when it takes more than a second)."""
        self.model_name = model_name
        self.cut_after_pieces: int | None = None
        """The next streamed answer's connection is dropped after this many text pieces
        (a proxy or the provider cutting a stream short), then it is reset."""
        self.thinking = thinking
        """A reasoning model (`testkit.fake_reasoning`): it thinks on every answer and
        refuses, as its provider does, a request that does not give the reasoning back."""
        self._port = port
        self._failures: deque[_Injected] = deque()
        self._delays: deque[float] = deque()
        self._closing = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._base_url: str | None = None

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:<port>/v1`, what `LLM_BASE_URL` / `OpenAIProvider` want."""
        if self._base_url is None:
            raise RuntimeError("the fake server is not started")
        return self._base_url

    def fail_next(
        self,
        status: int,
        body: Mapping[str, Any] | str,
        headers: Mapping[str, str] | None = None,
        *,
        times: int = 1,
    ) -> None:
        """Answer the next `times` requests with this error instead of asking the model."""
        self._failures.extend([_Injected(status, body, dict(headers or {}))] * times)

    def answer_next(self, body: Mapping[str, Any] | str, *, stream: bool = False) -> None:
        """Answer the next request with this body as it is (a recorded response: JSON, or
        an event stream's text when `stream`), instead of asking the model."""
        headers = {"Content-Type": "text/event-stream"} if stream else {}
        self._failures.append(_Injected(200, body, headers))

    def delay_next(self, seconds: float, *, times: int = 1) -> None:
        """Hold the next `times` answers for `seconds` (ended early when the server closes)."""
        self._delays.extend([seconds] * times)

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._complete)
        app.router.add_post("/chat/completions", self._complete)
        app.router.add_get("/v1/models", self._models)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self._port)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self._base_url = f"http://{host}:{port}/v1"
        return self._base_url

    async def close(self) -> None:
        self._closing.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def _models(self, _: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": self.model_name}]})

    def _count_connection(self, http_request: web.Request) -> None:
        transport = http_request.transport
        self.peers.add(transport.get_extra_info("peername") if transport else None)

    async def _complete(self, http_request: web.Request) -> web.StreamResponse:
        self._count_connection(http_request)
        raw = await http_request.text()
        try:
            body = json.loads(raw)
        except ValueError:
            self.requests.append({"invalid_json": raw})
            return web.json_response(error_body("request body is not JSON"), status=400)
        self.requests.append(body)
        headers = {k.lower(): v for k, v in http_request.headers.items()}
        self.headers.append(headers)
        delay = self._delays.popleft() if self._delays else self.delay
        if delay > 0:
            await self._wait(delay)
        refused = self._refused(body, headers)
        if refused is not None:
            return refused
        try:
            request = from_request(body)
        except ValueError as exc:
            return web.json_response(error_body(str(exc)), status=400)
        response = await self._answer(request)
        if isinstance(response, web.Response):
            return response
        if request.tool_choice == "none" and response.tool_calls:
            # the API never answers a tool call under tool_choice "none"
            response = replace(response, tool_calls=(), finish_reason="stop")
        model = request.model or self.model_name
        if self.cache is not None:
            seen = self.cache.account(_blocks(body))
            output = response.usage.output_tokens if response.usage else len(response.text) // 4
            response = LLMResponse(
                text=response.text,
                tool_calls=response.tool_calls,
                finish_reason=response.finish_reason,
                model=response.model,
                usage=Usage(
                    input_tokens=seen.total,
                    output_tokens=output,
                    cached_tokens=seen.read,
                    cache_write_tokens=seen.written,
                ),
            )
        self.reported.append(response.usage)
        answer = to_response(response, model=model)
        if self.thinking is not None:
            self.thinking.think(answer, body)
        if "usage" in answer:
            answer["usage"] = _shaped(answer["usage"], self.usage_shape)
        if body.get("stream") is True:
            return await self._stream(http_request, answer, body)
        return web.json_response(answer)

    def _refused(self, body: dict[str, Any], headers: dict[str, str]) -> web.Response | None:
        """The answer to a request refused before the model sees it (an injected failure,
        a malformed body, a thinking model's rule)."""
        if self._failures:
            injected = self._failures.popleft()
            return raw_answer(injected.status, injected.body, injected.headers)
        refused = _refusal(body)
        if refused is not None:
            return web.json_response(refused, status=400)
        if self.thinking is not None:
            try:
                self.thinking.check(body)
            except Refusal as refusal:
                return raw_answer(refusal.status, refusal.body)
        return None

    async def _answer(self, request: LLMRequest) -> LLMResponse | web.Response:
        """The model's answer, or the error the API sends for what the model raised."""
        try:
            return await self.model.complete(request)
        except ContextOverflow as exc:
            message = f"This model's maximum context length is exceeded. {exc}"
            return raw_answer(400, error_body(message, code="context_length_exceeded"))
        except ProviderRateLimited as exc:
            headers = {}
            if exc.retry_after is not None:
                headers["Retry-After"] = str(math.ceil(exc.retry_after))
            return raw_answer(429, error_body(str(exc), kind="rate_limit_exceeded"), headers)
        except ProviderBadResponse:
            return LLMResponse(text="")  # the client sees an empty reply
        except ProviderError as exc:
            return raw_answer(503, error_body(str(exc), kind="server_error"))

    async def _stream(
        self, http_request: web.Request, answer: dict[str, Any], body: dict[str, Any]
    ) -> web.StreamResponse:
        """The answer as chat-completion chunks: the text in pieces, each tool call as a
        name chunk and two argument chunks, then the finish reason, then usage."""
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await stream.prepare(http_request)
        base = {"id": answer["id"], "object": "chat.completion.chunk", "model": answer["model"]}
        choice = answer["choices"][0]
        message = choice["message"]

        async def send(payload: object) -> None:
            await stream.write(f"data: {json.dumps(payload, ensure_ascii=False)}\n\n".encode())

        text = message.get("content") or ""
        await send({**base, "choices": [{"index": 0, "delta": {"role": "assistant"}}]})
        for key in ("reasoning_content", "reasoning"):
            thought = message.get(key) or ""
            for start in range(0, len(thought), 11):
                piece = {key: thought[start : start + 11]}
                await send({**base, "choices": [{"index": 0, "delta": piece}]})
        for start in range(0, len(text), 7):
            if self.cut_after_pieces is not None and start // 7 >= self.cut_after_pieces:
                self.cut_after_pieces = None
                if http_request.transport is not None:
                    http_request.transport.close()  # no terminating chunk: a cut body
                return stream
            piece = {"content": text[start : start + 7]}
            await send({**base, "choices": [{"index": 0, "delta": piece}]})
            if self.piece_delay > 0:
                await self._wait(self.piece_delay)
        for index, call in enumerate(message.get("tool_calls") or []):
            arguments = call["function"]["arguments"]
            half = len(arguments) // 2
            head = {"index": index, "id": call["id"], "type": "function"}
            if "extra_content" in call:  # Gemini: the signature rides on the call's first delta
                head["extra_content"] = call["extra_content"]
            for delta in (
                {**head, "function": {"name": call["function"]["name"], "arguments": ""}},
                {"index": index, "function": {"arguments": arguments[:half]}},
                {"index": index, "function": {"arguments": arguments[half:]}},
            ):
                await send({**base, "choices": [{"index": 0, "delta": {"tool_calls": [delta]}}]})
        finish = {"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}
        await send({**base, "choices": [finish]})
        options = body.get("stream_options")
        if isinstance(options, dict) and options.get("include_usage") and "usage" in answer:
            await send({**base, "choices": [], "usage": answer["usage"]})
        await stream.write(b"data: [DONE]\n\n")
        await stream.write_eof()
        return stream

    async def _wait(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._closing.wait(), timeout=seconds)


def _shaped(usage: dict[str, Any], shape: str) -> dict[str, Any]:
    cached = usage["prompt_tokens_details"]["cached_tokens"]
    if shape == "deepseek":
        return {
            "prompt_tokens": usage["prompt_tokens"],
            "completion_tokens": usage["completion_tokens"],
            "total_tokens": usage["total_tokens"],
            "prompt_tokens_details": {"cached_tokens": 0},
            "prompt_cache_hit_tokens": cached,
            "prompt_cache_miss_tokens": usage["prompt_tokens"] - cached,
        }
    if shape == "moonshot":
        return {
            "prompt_tokens": usage["prompt_tokens"],
            "completion_tokens": usage["completion_tokens"],
            "total_tokens": usage["total_tokens"],
            "cached_tokens": cached,
        }
    return usage


def _refusal(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The 400 body a real endpoint answers this request with, or None."""
    model = str(body.get("model", "")).lower().rpartition("/")[2]
    if "max_tokens" in body and model.startswith(_COMPLETION_ONLY):
        return {
            "error": {
                "message": "Unsupported parameter: 'max_tokens' is not supported with this "
                "model. Use 'max_completion_tokens' instead.",
                "type": "invalid_request_error",
                "param": "max_tokens",
                "code": "unsupported_parameter",
            }
        }
    marked = sum(block.marked for block in _blocks(body))
    if marked > 4:
        message = f"A maximum of 4 blocks with cache_control may be provided. Found {marked}."
        return error_body(message)
    return _tool_choice_refusal(body)


_TOOL_CHOICES = ("none", "auto", "required")


def _tool_choice_refusal(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """OpenAI's answers to a `tool_choice` it refuses: without `tools`, or not one of its
    strings or a `{"type": "function", "function": {"name": ...}}` naming an offered tool."""
    if "tool_choice" not in body:
        return None
    choice = body["tool_choice"]

    def refused(message: str, code: str | None = None) -> dict[str, Any]:
        return {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": "tool_choice",
                "code": code,
            }
        }

    if not body.get("tools"):
        return refused(
            "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are "
            "specified."
        )
    if isinstance(choice, str):
        if choice in _TOOL_CHOICES:
            return None
        return refused(
            f"Invalid value: '{choice}'. Supported values are: 'none', 'auto', and 'required'.",
            "invalid_value",
        )
    function = choice.get("function") if isinstance(choice, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    offered = {
        tool.get("function", {}).get("name") for tool in body["tools"] if isinstance(tool, dict)
    }
    if not isinstance(choice, dict) or choice.get("type") != "function" or name not in offered:
        return refused(f"Invalid value for 'tool_choice': {json.dumps(choice)[:100]}.")
    return None


def _blocks(body: Mapping[str, Any]) -> list[Block]:
    """The request in prefix order (tools, then each message's parts), markers noted."""
    blocks = [Block(tool) for tool in body.get("tools") or []]
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        parts = content if isinstance(content, list) else [content]
        head = {k: v for k, v in message.items() if k != "content"}
        for part in parts:
            bare: object
            if isinstance(part, dict):
                bare = {k: v for k, v in part.items() if k not in _MARKERS}
                marked = any(k in part for k in _MARKERS)
            else:
                bare, marked = part, False
            blocks.append(Block({"message": head, "part": bare}, marked=marked))
    return blocks


def raw_answer(status: int, body: object, headers: Mapping[str, str] | None = None) -> web.Response:
    """An answer with `body` as given: text when a string, else JSON (a recorded provider
    body, an injected failure)."""
    if isinstance(body, str):
        return web.Response(status=status, text=body, headers=dict(headers or {}))
    if isinstance(body, Mapping):
        body = dict(body)
    return web.json_response(body, status=status, headers=dict(headers or {}))


async def _serve(port: int) -> None:
    async with FakeOpenAIServer(ScriptedModel.demo(), port=port) as server:
        print(server.base_url, flush=True)
        await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=0)
    asyncio.run(_serve(parser.parse_args().port))


if __name__ == "__main__":
    main()


__all__ = ["FakeOpenAIServer", "raw_answer"]

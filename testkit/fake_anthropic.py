"""A fake Anthropic Messages API on 127.0.0.1, backed by any LLMProvider (tests drive the real
`AnthropicProvider` against it).

`POST /v1/messages` validates what the real API rejects (a missing `anthropic-version`, a
missing or wrong `x-api-key` when `api_key` is set, no `max_tokens`, a `system` role inside
`messages`, more than 4 `cache_control` blocks, a 1h entry after a 5m one, a `tool_choice`
that is not an object of type auto, any, tool or none), answers in Anthropic's usage shape
with reads and writes from `fake_cache.PrefixCache` (consistent with the breakpoints
received; message blocks keyed by `tool_choice`, as the real cache keys them), never a
`tool_use` under `tool_choice` none, errors in Anthropic's format (`{"type": "error",
...}`, 529 `overloaded_error`, 429 with `retry-after`), and streams the Messages event
stream when the body says `stream: true`. `reported` keeps each usage it sent. With
`thinking` (`testkit.fake_reasoning`) it answers with thinking blocks (streamed through
`thinking_delta` / `signature_delta`) and refuses a request that does not give them back.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

from aiohttp import web

from bot.errors import ContextOverflow, ProviderBadResponse, ProviderError, ProviderRateLimited
from bot.ports import LLMProvider, LLMRequest, LLMResponse, Usage
from testkit.anthropic_server_wire import (
    cache_breakpoints,
    error_body,
    from_request,
    to_response,
    usage_to_wire,
)
from testkit.fake_cache import Block, PrefixCache
from testkit.fake_reasoning import Refusal, ThinkingModel
from testkit.fake_server import FakeOpenAIServer, raw_answer

MAX_CACHE_CONTROL = 4


class FakeAnthropicServer(FakeOpenAIServer):
    """The Messages API; `base_url` is `http://127.0.0.1:<port>` (the provider adds
    `/v1/messages`)."""

    def __init__(
        self,
        model: LLMProvider | None = None,
        *,
        port: int = 0,
        model_name: str = "claude-fake",
        api_key: str | None = None,
        thinking: ThinkingModel | None = None,
    ) -> None:
        super().__init__(model, port=port, model_name=model_name, thinking=thinking)
        self.api_key = api_key
        self.prompt_cache = PrefixCache(mode="breakpoints")

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/messages", self._messages)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self._port)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self._base_url = f"http://{host}:{port}"
        return self._base_url

    async def _messages(self, http_request: web.Request) -> web.StreamResponse:
        self._count_connection(http_request)
        raw = await http_request.text()
        headers = {k.lower(): v for k, v in http_request.headers.items()}
        self.headers.append(headers)
        try:
            body = json.loads(raw)
        except ValueError:
            self.requests.append({"invalid_json": raw})
            return _error(400, "There was an error parsing the body of your request.")
        self.requests.append(body)
        refused = self._refused(body, headers)
        if refused is not None:
            return refused
        try:
            request = from_request(body)
        except ValueError as exc:
            return _error(400, str(exc))
        response = await self._answer(request)
        if isinstance(response, web.Response):
            return response
        if request.tool_choice == "none" and response.tool_calls:
            # the API never answers a tool_use under tool_choice none
            response = replace(response, tool_calls=(), finish_reason="end_turn")
        seen = self.prompt_cache.account(_blocks(body))
        output = response.usage.output_tokens if response.usage else len(response.text) // 4 + 1
        usage = Usage(
            input_tokens=seen.total,
            output_tokens=output,
            cached_tokens=seen.read,
            cache_write_tokens=seen.written,
        )
        self.reported.append(usage)
        model = request.model or self.model_name
        answer = to_response(response, model=model, usage=usage)
        if self.thinking is not None:
            self.thinking.think(answer, body)
        ttl = _last_ttl(body)
        answer["usage"] = usage_to_wire(usage, ttl=ttl)
        if body.get("stream") is True:
            return await self._event_stream(http_request, answer)
        return web.json_response(answer)

    def _refused(self, body: dict[str, Any], headers: dict[str, str]) -> web.Response | None:
        """The answer to a request the API refuses before the model sees it (a wrong key,
        no version header, a malformed body, a thinking model's rule, an injected failure)."""
        if self.api_key is not None and headers.get("x-api-key") != self.api_key:
            return _error(401, "invalid x-api-key", kind="authentication_error")
        if "anthropic-version" not in headers:
            return _error(400, "anthropic-version: header is required")
        refused = _refusal(body)
        if refused is not None:
            return _error(400, refused)
        if self.thinking is not None:
            try:
                self.thinking.check(body)
            except Refusal as refusal:
                return raw_answer(refusal.status, refusal.body, {})
        if self._failures:
            injected = self._failures.popleft()
            return raw_answer(injected.status, injected.body, injected.headers)
        return None

    async def _answer(self, request: LLMRequest) -> LLMResponse | web.Response:
        """The model's answer, or the error the API sends for what the model raised."""
        try:
            return await self.model.complete(request)
        except ContextOverflow:
            return _error(400, "prompt is too long: 208310 tokens > 200000 maximum")
        except ProviderRateLimited as exc:
            extra = {"retry-after": str(math.ceil(exc.retry_after or 1))}
            return _error(429, str(exc), kind="rate_limit_error", headers=extra)
        except ProviderBadResponse:
            return LLMResponse(text="…")
        except ProviderError as exc:
            return _error(529, str(exc), kind="overloaded_error")

    async def _event_stream(
        self, http_request: web.Request, answer: dict[str, Any]
    ) -> web.StreamResponse:
        """The documented event order: message_start (input usage), one block at a time
        (start, deltas, stop), message_delta (stop reason, output usage), message_stop."""
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await stream.prepare(http_request)

        async def send(event: str, data: dict[str, Any]) -> None:
            payload = json.dumps({"type": event, **data}, ensure_ascii=False)
            await stream.write(f"event: {event}\ndata: {payload}\n\n".encode())

        usage = dict(answer["usage"])
        start_usage = {**usage, "output_tokens": 1}
        message = {**answer, "content": [], "stop_reason": None, "usage": start_usage}
        await send("message_start", {"message": message})
        await send("ping", {})
        for index, block in enumerate(answer["content"]):
            if block["type"] == "thinking":
                empty = {"type": "thinking", "thinking": "", "signature": ""}
                await send("content_block_start", {"index": index, "content_block": empty})
                thought = block["thinking"]
                for start in range(0, len(thought), 11):
                    delta = {"type": "thinking_delta", "thinking": thought[start : start + 11]}
                    await send("content_block_delta", {"index": index, "delta": delta})
                signature = {"type": "signature_delta", "signature": block["signature"]}
                await send("content_block_delta", {"index": index, "delta": signature})
            elif block["type"] == "redacted_thinking":
                await send("content_block_start", {"index": index, "content_block": block})
            elif block["type"] == "text":
                await send(
                    "content_block_start",
                    {"index": index, "content_block": {"type": "text", "text": ""}},
                )
                text = block["text"]
                for start in range(0, len(text), 7):
                    delta = {"type": "text_delta", "text": text[start : start + 7]}
                    await send("content_block_delta", {"index": index, "delta": delta})
            else:
                opening = {**block, "input": {}}
                await send("content_block_start", {"index": index, "content_block": opening})
                arguments = json.dumps(block["input"], ensure_ascii=False)
                half = len(arguments) // 2
                for piece in (arguments[:half], arguments[half:]):
                    delta = {"type": "input_json_delta", "partial_json": piece}
                    await send("content_block_delta", {"index": index, "delta": delta})
            await send("content_block_stop", {"index": index})
        await send(
            "message_delta",
            {
                "delta": {"stop_reason": answer["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
        await send("message_stop", {})
        await stream.write_eof()
        return stream


def _refusal(body: dict[str, Any]) -> str | None:
    if not isinstance(body.get("max_tokens"), int):
        return "max_tokens: Field required"
    for index, message in enumerate(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "system":
            return (
                f"messages.{index}.role: Input should be 'user' or 'assistant' (a system "
                "prompt goes in the top-level system parameter)"
            )
    unanswered = _unanswered_tool_use(body.get("messages") or [])
    if unanswered is not None:
        return unanswered
    for block in _blocks(body):
        inner = block.content.get("block") if isinstance(block.content, dict) else None
        if isinstance(inner, dict) and inner.get("type") == "text" and not inner.get("text"):
            return "text content blocks must be non-empty"
    points = cache_breakpoints(body)
    if len(points) > MAX_CACHE_CONTROL:
        return (
            f"A maximum of {MAX_CACHE_CONTROL} blocks with cache_control may be provided. "
            f"Found {len(points)}."
        )
    seen_short = False
    for point in points:
        if point.ttl == "5m":
            seen_short = True
        elif seen_short:
            return "a ttl='1h' cache_control block must not come after a ttl='5m' one"
    return _tool_choice_refusal(body)


_TOOL_CHOICE_TYPES = ("auto", "any", "tool", "none")


def _tool_choice_refusal(body: dict[str, Any]) -> str | None:
    """The Messages API's `tool_choice`: an object whose `type` is auto, any, tool (with
    the `name` of an offered tool) or none."""
    if "tool_choice" not in body:
        return None
    choice = body["tool_choice"]
    if not isinstance(choice, dict):
        return "tool_choice: Input should be a valid dictionary or object to extract fields from"
    kind = choice.get("type")
    if kind not in _TOOL_CHOICE_TYPES:
        expected = ", ".join(f"'{t}'" for t in _TOOL_CHOICE_TYPES)
        return (
            f"tool_choice: Input tag '{kind}' found using 'type' does not match any of the "
            f"expected tags: {expected}"
        )
    offered = {tool.get("name") for tool in body.get("tools") or [] if isinstance(tool, dict)}
    if kind == "tool" and choice.get("name") not in offered:
        return f"tool_choice.name: no tool named {choice.get('name')!r} in tools"
    return None


def _unanswered_tool_use(messages: list[Any]) -> str | None:
    """The API's rule: every `tool_use` is answered by a `tool_result` in the very next
    message, which is a user message that starts with those results."""
    for index, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        ids = [b.get("id") for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
        if not ids:
            continue
        following = messages[index + 1] if index + 1 < len(messages) else {}
        answer = following.get("content") if isinstance(following, dict) else None
        blocks = answer if isinstance(answer, list) else []
        leading = []
        for block in blocks:
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                break
            leading.append(block.get("tool_use_id"))
        if following.get("role") != "user" or set(ids) - set(leading):
            return (
                f"messages.{index + 1}: `tool_use` ids were found without `tool_result` "
                "blocks immediately after"
            )
    return None


def _blocks(body: dict[str, Any]) -> list[Block]:
    blocks: list[Block] = []
    for block in body.get("tools") or []:
        blocks.append(_block(block))
    system = body.get("system")
    for block in system if isinstance(system, list) else [system] if system else []:
        blocks.append(_block(block))
    # the cache keys message blocks (not tools or system) by tool_choice; absent is auto
    choice = json.dumps(body.get("tool_choice") or {"type": "auto"}, sort_keys=True)
    for message in body.get("messages") or []:
        content = message.get("content")
        for block in content if isinstance(content, list) else [content]:
            found = _block(block, role=message.get("role"))
            blocks.append(Block(found.content, marked=found.marked, keyed=choice))
    if isinstance(body.get("cache_control"), dict) and blocks:
        blocks[-1] = Block(blocks[-1].content, marked=True)  # automatic mode: the last block
    return blocks


def _block(block: object, *, role: object = None) -> Block:
    if isinstance(block, dict):
        bare = {k: v for k, v in block.items() if k != "cache_control"}
        return Block({"role": role, "block": bare}, marked="cache_control" in block)
    return Block({"role": role, "block": block})


def _last_ttl(body: dict[str, Any]) -> str:
    points = cache_breakpoints(body)
    return points[-1].ttl if points else "5m"


def _error(
    status: int,
    message: str,
    *,
    kind: str = "invalid_request_error",
    headers: dict[str, str] | None = None,
) -> web.Response:
    return web.json_response(error_body(message, kind=kind), status=status, headers=headers)


__all__ = ["FakeAnthropicServer"]

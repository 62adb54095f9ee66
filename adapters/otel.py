"""OpenTelemetry traces of turns, model calls and tool calls, exported over OTLP/HTTP.

Imported only when an OTLP endpoint is configured (`bot/app/telemetry.py`); needs the `otel`
extra. Spans follow the OpenTelemetry GenAI semantic conventions, so Langfuse, Grafana Tempo
or Jaeger read them as agent runs:

    invoke_agent {bot name}     INTERNAL  one turn (`TurnObserver.turn`)
    ├── chat {model}            CLIENT    one model call (`ModelCalled` on the bus)
    └── execute_tool {tool}     INTERNAL  one tool call (`TurnObserver.tool_call`)

A model call's span is made when its `ModelCalled` arrives, right after the call: it ends
then and starts `latency_ms` earlier. It is the child of the turn that is current, since the
bus delivers inside the turn; a summary prepared in the background after a reply hangs
under the turn that started it.

Attributes: `gen_ai.operation.name`, `gen_ai.provider.name` (from the route's endpoint: the
well-known name of its host, else its wire, `openai` or `anthropic`; `tgbot.offline` for the
scripted model), `gen_ai.request.model`, `gen_ai.response.model`,
`gen_ai.response.finish_reasons`, `gen_ai.request.max_tokens`, `gen_ai.conversation.id` (the
session), `gen_ai.usage.input_tokens` (the whole billed input, cache reads and writes
included, as the conventions count it), `gen_ai.usage.output_tokens`,
`gen_ai.usage.cache_read.input_tokens`, `gen_ai.usage.cache_creation.input_tokens`,
`server.address` / `server.port`; `gen_ai.agent.name` on the turn, `gen_ai.tool.name`,
`gen_ai.tool.call.id` and `gen_ai.tool.type` on a tool call; `tgbot.call_id` links a model
call to its ledger line and its trace page (`/calls/{call_id}`). A failure sets the status
to ERROR and `error.type`: the exception's qualified class name for a model call or a turn
that raised, the `TurnFailed` key (`provider`, `capacity`, `overflow`, `bad_response`, …) or
`not_delivered` for a failed turn, the error code of a tool result (`unknown_tool`,
`bad_arguments`, `timeout`, …).

No message text leaves the process unless `capture_content` (OTEL_CAPTURE_CONTENT=true):
then `gen_ai.input.messages` / `gen_ai.output.messages` (JSON in the conventions' message
schema) go on model calls and `gen_ai.tool.call.arguments` / `gen_ai.tool.call.result` on
tool calls, with known secrets scrubbed. Error texts are content too (a provider's 400 may
echo the request: "… 'my pin is 5519' is not valid"): without `capture_content` a span's
status description keeps only the error's type and its HTTP status (`ProviderBadResponse:
HTTP 400`; `http.response.status_code` as an attribute), never its words.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from bot.agent.error_text import describe_error
from bot.agent.events import EventBus, ModelCalled, ToolWatch, TurnOutcome, TurnWatch
from bot.domain.messages import ChatMessage, ToolCall
from bot.domain.records import ToolResult
from bot.ports import LLMResponse, SessionInfo
from bot.redact import scrub

DEFAULT_SERVICE_NAME = "tgbot"
OFFLINE_PROVIDER = "tgbot.offline"
"""`gen_ai.provider.name` of the scripted model (the demo, `--offline`, tests)."""

WELL_KNOWN_HOSTS = {
    "api.openai.com": "openai",
    "api.anthropic.com": "anthropic",
    "api.deepseek.com": "deepseek",
    "api.x.ai": "x_ai",
    "api.groq.com": "groq",
    "api.mistral.ai": "mistral_ai",
    "api.perplexity.ai": "perplexity",
    "api.cohere.com": "cohere",
    "generativelanguage.googleapis.com": "gcp.gemini",
}
"""Hosts whose `gen_ai.provider.name` the conventions list; any other host is named by its
wire (the conventions: "the instrumentation's best knowledge")."""

_FINISH_REASONS = {
    "tool_calls": "tool_call",
    "tool_use": "tool_call",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
}
"""Provider stop reasons in the output-message schema's words."""


@dataclass(frozen=True, slots=True)
class Served:
    """Who serves a route's model, as the GenAI conventions name it."""

    provider: str
    address: str | None = None
    port: int | None = None


def served_by(base_url: str | None, kind: str | None = None) -> Served:
    """The provider name and server of an endpoint spoken in `kind`'s wire (a URL of None:
    the offline scripted model)."""
    if not base_url:
        return Served(OFFLINE_PROVIDER)
    parts = urlsplit(base_url)
    host = (parts.hostname or "").lower()
    known = WELL_KNOWN_HOSTS.get(host)
    if known is None and host.endswith(".openai.azure.com"):
        known = "azure.ai.openai"
    wire = "anthropic" if kind == "anthropic" else "openai"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return Served(known or wire, address=host or None, port=port)


def service_resource() -> Resource:
    """The SDK's resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES), named `tgbot` when
    neither names the service."""
    detected = Resource.create()
    name = str(detected.attributes.get(SERVICE_NAME, ""))
    if name and not name.startswith("unknown_service"):
        return detected
    return detected.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))


_current_turn: ContextVar[Span | None] = ContextVar("tgbot_otel_turn", default=None)


class OtelTracer:
    """The `TurnObserver` and `ModelCalled` subscriber that turns a bot's work into spans.

    `exporter` defaults to OTLP/HTTP configured by the standard OTEL_EXPORTER_OTLP_*
    variables; spans are batched and sent from the SDK's own thread. `force_flush` sends what
    is pending, `shutdown` does and stops (at the end of `tgbot run`)."""

    def __init__(self, *, capture_content: bool, exporter: SpanExporter | None = None) -> None:
        self.capture_content = capture_content
        self.provider = TracerProvider(resource=service_resource())
        self.provider.add_span_processor(BatchSpanProcessor(exporter or OTLPSpanExporter()))
        self.tracer = self.provider.get_tracer("tgbot")
        self.agent_name = DEFAULT_SERVICE_NAME
        self.routes: dict[str, Served] = {}

    def attach(
        self,
        bus: EventBus,
        *,
        agent_name: str,
        endpoints: Mapping[str, tuple[str | None, str | None]],
    ) -> OtelTracer:
        """Receive the model calls of `bus`; `endpoints` maps each profile name to
        its base URL and wire kind (a URL of None: the offline model)."""
        self.agent_name = agent_name
        self.routes = {name: served_by(url, kind) for name, (url, kind) in endpoints.items()}
        bus.on(ModelCalled, self.on_model_call)
        return self

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.provider.force_flush(timeout_millis)

    def shutdown(self) -> None:
        self.provider.shutdown()

    async def aclose(self) -> None:
        """Released last on stop (`bot.app.serve`'s exit stack): the spans still batched
        are sent before the process ends (off the loop: the export blocks)."""
        await asyncio.to_thread(self.provider.shutdown)

    # ---------------------------------------------------------------- turns

    def turn(self, session: SessionInfo, turn_id: str) -> AbstractContextManager[TurnWatch]:
        return self._turn(session, turn_id)

    @contextmanager
    def _turn(self, session: SessionInfo, turn_id: str) -> Iterator[TurnWatch]:
        span = self.tracer.start_span(
            f"invoke_agent {self.agent_name}",
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": self.agent_name,
                "gen_ai.conversation.id": str(session.id),
                "tgbot.turn_id": turn_id,
                "tgbot.scene": session.scene,
                "tgbot.chat_id": session.key.chat_id,
            },
        )
        token = _current_turn.set(span)
        try:
            with trace.use_span(span, record_exception=False, set_status_on_exception=False):
                yield _TurnSpan(span, capture_content=self.capture_content)
        except BaseException as exc:
            _raised(span, exc, capture_content=self.capture_content)
            raise
        finally:
            _current_turn.reset(token)
            span.end()

    # ---------------------------------------------------------------- tool calls

    def tool_call(self, call: ToolCall) -> AbstractContextManager[ToolWatch]:
        return self._tool_call(call)

    @contextmanager
    def _tool_call(self, call: ToolCall) -> Iterator[ToolWatch]:
        attributes: dict[str, str] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
        }
        if self.capture_content:
            attributes["gen_ai.tool.call.arguments"] = scrub(call.arguments)
        span = self.tracer.start_span(
            f"execute_tool {call.name}", kind=SpanKind.INTERNAL, attributes=attributes
        )
        try:
            with trace.use_span(span, record_exception=False, set_status_on_exception=False):
                yield _ToolSpan(span, capture_content=self.capture_content)
        except BaseException as exc:
            _raised(span, exc, capture_content=self.capture_content)
            raise
        finally:
            span.end()

    # ---------------------------------------------------------------- model calls

    def on_model_call(self, call: ModelCalled) -> None:
        ended = time.time_ns()
        served = self.routes.get(call.route.profile, Served(OFFLINE_PROVIDER))
        attributes: dict[str, str | int | Sequence[str]] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": served.provider,
            "gen_ai.request.model": call.route.model,
            "gen_ai.conversation.id": str(call.session.id),
            "tgbot.call_id": call.call_id,
            "tgbot.turn_id": call.turn_id,
            "tgbot.iteration": call.iteration,
            "tgbot.purpose": "compaction"
            if call.purpose == "compaction"
            else "final_summary"
            if call.final
            else "turn",
            "tgbot.profile": call.route.profile,
        }
        if served.address is not None:
            attributes["server.address"] = served.address
        if served.port is not None:
            attributes["server.port"] = served.port
        request, response = call.request, call.response
        if request is not None and request.max_output_tokens is not None:
            attributes["gen_ai.request.max_tokens"] = request.max_output_tokens
        if response is not None:
            if response.model:
                attributes["gen_ai.response.model"] = response.model
            if response.finish_reason:
                attributes["gen_ai.response.finish_reasons"] = (response.finish_reason,)
        if call.usage is not None:
            attributes["gen_ai.usage.input_tokens"] = call.usage.input_tokens
            attributes["gen_ai.usage.output_tokens"] = call.usage.output_tokens
            attributes["gen_ai.usage.cache_read.input_tokens"] = call.usage.cached_tokens
            attributes["gen_ai.usage.cache_creation.input_tokens"] = call.usage.cache_write_tokens
        if self.capture_content:
            if request is not None:
                attributes["gen_ai.input.messages"] = scrub(input_messages(request.messages))
            if response is not None:
                attributes["gen_ai.output.messages"] = scrub(output_messages(response))
        span = self.tracer.start_span(
            f"chat {call.route.model}",
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=ended - call.latency_ms * 1_000_000,
        )
        if call.error is not None:
            _raised(span, call.error, capture_content=self.capture_content)
        span.end(end_time=ended)
        turn = _current_turn.get()
        if turn is not None and turn.is_recording() and call.purpose == "turn":
            turn.set_attribute("gen_ai.provider.name", served.provider)
            turn.set_attribute("gen_ai.request.model", call.route.model)


class _TurnSpan:
    def __init__(self, span: Span, *, capture_content: bool) -> None:
        self.span = span
        self.capture_content = capture_content

    def ended(self, outcome: TurnOutcome) -> None:
        self.span.set_attribute("tgbot.iterations", outcome.iterations)
        if outcome.status == "failed":
            kind = outcome.failure or "_OTHER"
            self.span.set_attribute("error.type", kind)
            error = outcome.error or ""
            described = (
                scrub(error)[:300]
                if self.capture_content
                else _content_free(kind, error, self.span)
            )
            self.span.set_status(Status(StatusCode.ERROR, described))


class _ToolSpan:
    def __init__(self, span: Span, *, capture_content: bool) -> None:
        self.span = span
        self.capture_content = capture_content

    def ended(self, result: ToolResult) -> None:
        if result.is_error:
            self.span.set_attribute("error.type", result.error_code or "_OTHER")
            self.span.set_status(Status(StatusCode.ERROR))
        if self.capture_content:
            self.span.set_attribute("gen_ai.tool.call.result", scrub(result.content))


def _raised(span: Span, exc: BaseException, *, capture_content: bool) -> None:
    kind = _qualified(exc)
    span.set_attribute("error.type", kind)
    if capture_content:
        span.set_status(Status(StatusCode.ERROR, describe_error(exc)))
    else:
        span.set_status(Status(StatusCode.ERROR, _content_free(type(exc).__name__, str(exc), span)))


_HTTP_STATUS = re.compile(r"HTTP (\d{3})\b")
"""How our provider errors name the response's status (`HTTP 400: …`), near their start."""


def _content_free(kind: str, error: str, span: Span) -> str:
    """An error's description without its words: its type, and its HTTP status when it
    names one (also set as `http.response.status_code`); low cardinality by construction."""
    found = _HTTP_STATUS.search(error[:80])
    if found is None:
        return kind
    span.set_attribute("http.response.status_code", int(found[1]))
    return f"{kind}: HTTP {found[1]}"


def _qualified(exc: BaseException) -> str:
    kind = type(exc)
    return (
        kind.__qualname__
        if kind.__module__ == "builtins"
        else f"{kind.__module__}.{kind.__qualname__}"
    )


# ---------------------------------------------------------------- message content


def input_messages(messages: Sequence[ChatMessage]) -> str:
    """The request's messages in the conventions' input-message schema, as JSON."""
    return json.dumps([_message(m) for m in messages], ensure_ascii=False)


def output_messages(response: LLMResponse) -> str:
    """The reply in the conventions' output-message schema, as JSON."""
    parts: list[dict[str, object]] = []
    if response.text:
        parts.append({"type": "text", "content": response.text})
    parts.extend(_tool_call_part(call) for call in response.tool_calls)
    reason = response.finish_reason or ("tool_calls" if response.tool_calls else "stop")
    message = {
        "role": "assistant",
        "parts": parts,
        "finish_reason": _FINISH_REASONS.get(reason, reason),
    }
    return json.dumps([message], ensure_ascii=False)


def _message(message: ChatMessage) -> dict[str, object]:
    if message.role == "tool":
        response = {
            "type": "tool_call_response",
            "id": message.tool_call_id,
            "result": message.content,
        }
        return {"role": "tool", "parts": [response]}
    parts: list[dict[str, object]] = []
    if message.content:
        parts.append({"type": "text", "content": message.content})
    for image in message.images:
        # a data URI is the image itself: its bytes stay out of the span
        url = image.url
        uri = url.partition(",")[0] + ",…" if url.startswith("data:") else url
        parts.append({"type": "uri", "modality": "image", "uri": uri})
    parts.extend(_tool_call_part(call) for call in message.tool_calls)
    return {"role": message.role, "parts": parts}


def _tool_call_part(call: ToolCall) -> dict[str, object]:
    try:
        arguments: object = json.loads(call.arguments or "{}")
    except json.JSONDecodeError:
        arguments = call.arguments
    return {"type": "tool_call", "id": call.id, "name": call.name, "arguments": arguments}

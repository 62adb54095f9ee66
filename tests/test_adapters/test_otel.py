"""OpenTelemetry traces of a real turn, received by a local OTLP/HTTP collector.

The app is the real wiring (`build_app` with the tracer `start_tracing` makes from the
environment) over an in-memory store and the scripted model; the spans travel through the
SDK's batch processor and the OTLP/HTTP exporter to a collector on 127.0.0.1 that decodes
each `ExportTraceServiceRequest`. What an operator relies on: one trace per turn, the model
and tool calls under it, the ledger's token counts on each model call, failures marked, no
message text unless OTEL_CAPTURE_CONTENT=true, and without an endpoint no OpenTelemetry at
all (nor a missing extra stopping anything but a start-up that asked for it).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from adapters.llm.scripted import Fail, ScriptedModel
from adapters.otel import OtelTracer, served_by
from bot.agent.ledger_read import read_entries
from bot.app.cli import main
from bot.app.telemetry import start_tracing
from bot.app.wiring import App, build_app
from bot.domain.messages import ToolCall
from bot.errors import ConfigError, ProviderUnavailable
from bot.ports import LLMRequest, LLMResponse, Usage
from testkit.memory_store import InMemoryStore
from tests.deadlines import EVENT, PROCESS_READY, deadline
from tests.fakes import RecordingMessenger, SteppingClock, inbound
from tests.rig import BOT_ID, BOT_NAME, rig_settings

START = datetime(2026, 11, 30, 6, 0, tzinfo=UTC)
ASKED = "Where did we leave the deploy checklist, Helper?"
ANSWER = "It is pinned in the ops channel since Tuesday."
QUERY = "deploy checklist"
FIRST = Usage(input_tokens=1500, output_tokens=40, cached_tokens=1024, cache_write_tokens=300)
SECOND = Usage(input_tokens=1720, output_tokens=25, cached_tokens=1408, cache_write_tokens=128)


# ---------------------------------------------------------------- the collector


class OtlpReceiver:
    """An OTLP/HTTP trace collector on 127.0.0.1: every POST to /v1/traces is kept raw and
    decoded; `wait_for_spans` blocks until enough spans arrived (or the deadline passes)."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.paths: list[str] = []
        self.requests: list[ExportTraceServiceRequest] = []
        self.arrived = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                decoded = ExportTraceServiceRequest.FromString(body)
                with receiver.arrived:
                    receiver.paths.append(self.path)
                    receiver.bodies.append(body)
                    receiver.requests.append(decoded)
                    receiver.arrived.notify_all()
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # `shutdown` waits for the serving loop to look at its flag, once per poll interval
        # (0.5 s by default: half a second of every test's teardown)
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def spans(self) -> list[Span]:
        with self.arrived:
            return [
                span
                for request in self.requests
                for resource in request.resource_spans
                for scope in resource.scope_spans
                for span in scope.spans
            ]

    def service_names(self) -> set[str]:
        with self.arrived:
            return {
                attribute.value.string_value
                for request in self.requests
                for resource in request.resource_spans
                for attribute in resource.resource.attributes
                if attribute.key == "service.name"
            }

    def wait_for_spans(self, count: int) -> list[Span]:
        with self.arrived:  # reentrant: `spans` takes it again
            self.arrived.wait_for(lambda: len(self.spans()) >= count, timeout=deadline(EVENT))
        spans = self.spans()
        assert len(spans) >= count, f"{len(spans)} spans arrived, expected {count}"
        return spans

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    collector = OtlpReceiver()
    yield collector
    collector.close()


@pytest.fixture
def otel_env(monkeypatch: pytest.MonkeyPatch, receiver: OtlpReceiver) -> None:
    """The standard variables pointing at the local collector, nothing else of OTel set."""
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")  # the exporter talks to the collector directly


def attributes(span: Span) -> dict[str, Any]:
    return {a.key: _value(a.value) for a in span.attributes}


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind is not None else None


# ---------------------------------------------------------------- one real turn


@dataclass
class Turn:
    app: App
    model: ScriptedModel
    messenger: RecordingMessenger
    data_dir: Path


def searching(request: LLMRequest) -> LLMResponse:
    """Two tool calls in one step: a real tool and one the bot does not have."""
    return LLMResponse(
        tool_calls=(
            ToolCall(
                id="call_search", name="search_history", arguments=json.dumps({"query": QUERY})
            ),
            ToolCall(id="call_missing", name="no_such_tool", arguments="{}"),
        ),
        usage=FIRST,
    )


def answering(request: LLMRequest) -> LLMResponse:
    return LLMResponse(text=ANSWER, usage=SECOND)


async def run_one_turn(data_dir: Path, tracer: OtelTracer | None, *steps: Any) -> Turn:
    """One mention answered by the app `tgbot run` wires, traced by `tracer`."""
    settings = rig_settings(data_dir, owner_id=42)
    model = ScriptedModel(steps)
    messenger = RecordingMessenger()
    clock = SteppingClock(START)
    app = build_app(
        settings,
        store=InMemoryStore(),
        messenger=messenger,
        bot_id=BOT_ID,
        bot_name=BOT_NAME,
        clock=clock,
        offline=model,
        tracing=tracer,
    )
    try:
        await app.inbound.on_message(
            inbound(message_id=1, text=f"@{BOT_NAME} {ASKED}", at=clock.now(), mentions_bot=True)
        )
        await app.inbound.drain()
        await app.ledger.flush()
    finally:
        await app.runner.aclose()
        await app.routes.aclose()
    return Turn(app=app, model=model, messenger=messenger, data_dir=data_dir)


@pytest.fixture
def tracer(otel_env: None) -> Iterator[OtelTracer]:
    made = start_tracing(os.environ)
    assert made is not None
    yield made
    made.shutdown()


def flushed(tracer: OtelTracer, receiver: OtlpReceiver, count: int) -> list[Span]:
    assert tracer.force_flush(int(deadline(EVENT) * 1000)), "the exporter did not flush"
    return receiver.wait_for_spans(count)


def by_name(spans: list[Span]) -> dict[str, list[Span]]:
    named: dict[str, list[Span]] = {}
    for span in spans:
        named.setdefault(span.name, []).append(span)
    return named


async def test_a_turn_is_one_trace_of_genai_spans(
    tmp_path: Path, tracer: OtelTracer, receiver: OtlpReceiver
) -> None:
    turn = await run_one_turn(tmp_path, tracer, searching, answering)
    assert turn.messenger.sent[-1].text == ANSWER
    spans = flushed(tracer, receiver, 5)
    assert len(spans) == 5, [s.name for s in spans]
    assert set(receiver.paths) == {"/v1/traces"}
    assert receiver.service_names() == {"tgbot"}
    named = by_name(spans)
    assert sorted(named) == [
        "chat offline-demo",
        "execute_tool no_such_tool",
        "execute_tool search_history",
        f"invoke_agent {BOT_NAME}",
    ]

    # the tree: one trace, the turn at its root, the model and tool calls its children
    (agent,) = named[f"invoke_agent {BOT_NAME}"]
    first, second = sorted(named["chat offline-demo"], key=lambda s: s.start_time_unix_nano)
    (search,) = named["execute_tool search_history"]
    (missing,) = named["execute_tool no_such_tool"]
    assert {s.trace_id for s in spans} == {agent.trace_id}
    assert agent.parent_span_id == b""
    for child in (first, second, search, missing):
        assert child.parent_span_id == agent.span_id, child.name
    assert agent.kind == Span.SPAN_KIND_INTERNAL
    assert first.kind == second.kind == Span.SPAN_KIND_CLIENT
    assert search.kind == missing.kind == Span.SPAN_KIND_INTERNAL
    # in the order they ran, inside the turn
    assert agent.start_time_unix_nano <= first.start_time_unix_nano
    assert first.end_time_unix_nano <= search.start_time_unix_nano
    assert search.end_time_unix_nano <= missing.start_time_unix_nano
    assert missing.end_time_unix_nano <= second.start_time_unix_nano
    assert second.end_time_unix_nano <= agent.end_time_unix_nano

    facts = attributes(agent)
    assert facts["gen_ai.operation.name"] == "invoke_agent"
    assert facts["gen_ai.agent.name"] == BOT_NAME
    assert facts["gen_ai.provider.name"] == "tgbot.offline"
    assert facts["gen_ai.request.model"] == "offline-demo"
    assert facts["tgbot.iterations"] == 2
    assert agent.status.code == Status.STATUS_CODE_UNSET

    # each model call carries its ledger line's tokens and call id
    ledger = {e.call_id: e for e in read_entries(tmp_path / "agent-traces")}
    assert len(ledger) == 2
    for span, usage in ((first, FIRST), (second, SECOND)):
        facts = attributes(span)
        entry = ledger[facts["tgbot.call_id"]]
        assert facts["gen_ai.operation.name"] == "chat"
        assert facts["gen_ai.provider.name"] == "tgbot.offline"
        assert facts["gen_ai.request.model"] == entry.model == "offline-demo"
        assert facts["gen_ai.response.model"] == "scripted"
        assert facts["gen_ai.conversation.id"] == str(entry.session)
        assert facts["gen_ai.conversation.id"] == attributes(agent)["gen_ai.conversation.id"]
        assert facts["tgbot.turn_id"] == entry.turn_id == attributes(agent)["tgbot.turn_id"]
        assert facts["gen_ai.usage.input_tokens"] == entry.input_tokens == usage.input_tokens
        assert facts["gen_ai.usage.output_tokens"] == entry.output_tokens == usage.output_tokens
        assert (
            facts["gen_ai.usage.cache_read.input_tokens"]
            == entry.cached_tokens
            == usage.cached_tokens
        )
        assert (
            facts["gen_ai.usage.cache_creation.input_tokens"]
            == entry.cache_write_tokens
            == usage.cache_write_tokens
        )
        # latency: the span lasts what the ledger measured (whole milliseconds)
        lasted_ms = (span.end_time_unix_nano - span.start_time_unix_nano) / 1_000_000
        assert lasted_ms == pytest.approx(entry.latency_ms, abs=1)
        assert span.status.code == Status.STATUS_CODE_UNSET
    assert attributes(first)["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert attributes(second)["gen_ai.response.finish_reasons"] == ["stop"]

    # tool calls: named and identified; the one that failed is marked with its error code
    assert attributes(search) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "search_history",
        "gen_ai.tool.call.id": "call_search",
        "gen_ai.tool.type": "function",
    }
    assert search.status.code == Status.STATUS_CODE_UNSET
    assert attributes(missing)["gen_ai.tool.call.id"] == "call_missing"
    assert attributes(missing)["error.type"] == "unknown_tool"
    assert missing.status.code == Status.STATUS_CODE_ERROR

    # no message text by default: not the member's, not the reply, not a tool's arguments
    sent = b"".join(receiver.bodies)
    for text in (ASKED, ANSWER, QUERY):
        assert text.encode() not in sent, text
    for span in spans:
        assert not {"gen_ai.input.messages", "gen_ai.output.messages"} & set(attributes(span))
        assert not {"gen_ai.tool.call.arguments", "gen_ai.tool.call.result"} & set(attributes(span))


async def test_capture_content_puts_the_messages_on_the_spans(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, otel_env: None, receiver: OtlpReceiver
) -> None:
    monkeypatch.setenv("OTEL_CAPTURE_CONTENT", "true")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "support-bot")
    tracer = start_tracing(os.environ)
    assert tracer is not None
    try:
        await run_one_turn(tmp_path, tracer, searching, answering)
        spans = flushed(tracer, receiver, 5)
    finally:
        tracer.shutdown()
    assert receiver.service_names() == {"support-bot"}
    named = by_name(spans)
    first, second = sorted(named["chat offline-demo"], key=lambda s: s.start_time_unix_nano)

    sent = json.loads(attributes(first)["gen_ai.input.messages"])
    assert sent[0]["role"] == "system"
    asked = [p["content"] for m in sent if m["role"] == "user" for p in m["parts"]]
    assert any(ASKED in text for text in asked)
    (called,) = json.loads(attributes(first)["gen_ai.output.messages"])
    assert called["finish_reason"] == "tool_call"
    assert [p["name"] for p in called["parts"]] == ["search_history", "no_such_tool"]
    assert called["parts"][0]["arguments"] == {"query": QUERY}

    # the second call was sent the tool results; its reply is the answer
    again = json.loads(attributes(second)["gen_ai.input.messages"])
    responses = [p for m in again if m["role"] == "tool" for p in m["parts"]]
    assert [p["id"] for p in responses] == ["call_search", "call_missing"]
    assert json.loads(attributes(second)["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": ANSWER}],
            "finish_reason": "stop",
        }
    ]

    (search,) = named["execute_tool search_history"]
    assert json.loads(attributes(search)["gen_ai.tool.call.arguments"]) == {"query": QUERY}
    assert isinstance(attributes(search)["gen_ai.tool.call.result"], str)
    (missing,) = named["execute_tool no_such_tool"]
    assert "no tool named" in attributes(missing)["gen_ai.tool.call.result"]


async def test_a_failed_model_call_marks_the_call_and_the_turn(
    tmp_path: Path, tracer: OtelTracer, receiver: OtlpReceiver
) -> None:
    turn = await run_one_turn(tmp_path, tracer, Fail(ProviderUnavailable("upstream 503")))
    assert turn.messenger.sent, "the chat is told the turn failed"
    spans = flushed(tracer, receiver, 2)
    named = by_name(spans)
    (agent,) = named[f"invoke_agent {BOT_NAME}"]
    (call,) = named["chat offline-demo"]
    assert call.parent_span_id == agent.span_id
    assert call.status.code == Status.STATUS_CODE_ERROR
    assert attributes(call)["error.type"] == "bot.errors.ProviderUnavailable"
    assert call.status.message == "ProviderUnavailable"  # its words are content: capture is off
    assert "gen_ai.usage.input_tokens" not in attributes(call)
    assert agent.status.code == Status.STATUS_CODE_ERROR
    assert attributes(agent)["error.type"] == "provider"


@pytest.mark.slow
async def test_tgbot_run_sends_the_spans_of_a_turn_before_it_exits(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    """The real process: the endpoint read from its environment, the model behind the fake
    OpenAI server (so the provider is named by its host), the spans sent by the stop."""
    from tests.bot_process import scripted_bot

    model = ScriptedModel([answering])
    async with scripted_bot(
        tmp_path, model, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url, OTEL_SERVICE_NAME="ops-bot"
    ) as (api, llm, bot, _store):
        api.push_update(
            api.user_message(-100500, {"id": 1001, "first_name": "Alice"}, "@test_bot hi")
        )
        await api.wait_for_call("sendMessage", timeout=deadline(EVENT))
        assert await bot.stop() == 0
    spans = await asyncio.to_thread(receiver.wait_for_spans, 2)
    named = by_name(spans)
    (agent,) = named[f"invoke_agent {api.first_name}"]
    (call,) = named["chat fake-model"]
    assert call.parent_span_id == agent.span_id
    facts = attributes(call)
    assert facts["gen_ai.provider.name"] == "openai"
    assert facts["server.address"] == "127.0.0.1"
    assert facts["server.port"] == urlsplit(llm.base_url).port
    assert facts["gen_ai.usage.input_tokens"] == SECOND.input_tokens
    assert facts["gen_ai.usage.cache_creation.input_tokens"] == SECOND.cache_write_tokens
    assert receiver.service_names() == {"ops-bot"}
    assert ANSWER.encode() not in b"".join(receiver.bodies)


ECHOED = "my bankpin5519 is 5519"
ECHOING_400 = {
    "error": {
        "message": f"Invalid 'messages[2].content': could not parse {ECHOED!r} as tool input",
        "type": "invalid_request_error",
        "param": "messages",
        "code": None,
    }
}
"""A provider's 400 that quotes the request (the shape of OpenAI's invalid_request_error;
the echo itself is written for this test)."""


@pytest.mark.slow
async def test_tgbot_run_keeps_an_echoed_input_out_of_error_spans(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    """Without OTEL_CAPTURE_CONTENT, a provider error that echoes the member's words marks
    the spans failed with a type and the HTTP status, and no span carries the words."""
    from tests.bot_process import scripted_bot

    async with scripted_bot(
        tmp_path, ScriptedModel([answering]), OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url
    ) as (api, llm, bot, _store):
        llm.fail_next(400, ECHOING_400)
        api.push_update(
            api.user_message(-100500, {"id": 1001, "first_name": "Alice"}, f"@test_bot {ECHOED}")
        )
        await api.wait_for_call("sendMessage", timeout=deadline(EVENT))  # the failure notice
        assert await bot.stop() == 0
    spans = await asyncio.to_thread(receiver.wait_for_spans, 2)
    named = by_name(spans)
    (call,) = named["chat fake-model"]
    (agent,) = named[f"invoke_agent {api.first_name}"]
    assert call.status.code == Status.STATUS_CODE_ERROR
    assert call.status.message == "ProviderRejected: HTTP 400"
    assert attributes(call)["error.type"] == "bot.errors.ProviderRejected"
    assert attributes(call)["http.response.status_code"] == 400
    assert agent.status.code == Status.STATUS_CODE_ERROR
    assert attributes(agent)["error.type"] == "rejected"
    assert agent.status.message == "rejected: HTTP 400"
    assert b"5519" not in b"".join(receiver.bodies)


# ---------------------------------------------------------------- off, and the extra missing


@pytest.fixture
def without_opentelemetry(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if the `otel` extra were not installed: importing any of it fails."""
    for name in [n for n in sys.modules if n == "opentelemetry" or n.startswith("opentelemetry.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    monkeypatch.delitem(sys.modules, "adapters.otel")


async def test_without_an_endpoint_nothing_of_opentelemetry_is_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, without_opentelemetry: None
) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    monkeypatch.setenv("OTEL_CAPTURE_CONTENT", "true")  # alone, it turns nothing on
    tracer = start_tracing(os.environ)
    assert tracer is None
    turn = await run_one_turn(tmp_path, tracer, answering)
    assert turn.messenger.sent[-1].text == ANSWER
    assert "adapters.otel" not in sys.modules


@pytest.mark.slow
def test_the_run_path_imports_no_opentelemetry_at_start_up() -> None:
    """A fresh interpreter: every module `tgbot run` loads, and no OTel among them."""
    probe = (
        "import os, sys\n"
        "import bot.app.cli, bot.app.serve, bot.app.wiring, bot.agent.runtime\n"
        "from bot.app.telemetry import start_tracing\n"
        "assert start_tracing({}) is None\n"
        "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry', 'adapters.otel'))))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=deadline(PROCESS_READY),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_an_endpoint_without_the_extra_is_one_line_and_exit_code_2(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    without_opentelemetry: None,
) -> None:
    for name in list(os.environ):
        if name.startswith(("BOT_", "LLM_", "DATABASE_", "DATA_", "DASHBOARD_", "OTEL_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("DATA_DIR", str(tmp_path))
    monkeypatch.setenv("BOT_TOKEN", "123456:ABC-DEF1234ghIkl")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    assert main(["run", "--offline"]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert lines == [
        "tgbot: OTEL_EXPORTER_OTLP_ENDPOINT: set, but OpenTelemetry is not installed: "
        "pip install 'tgbot[otel]'"
    ], captured.err


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"},
            "OTEL_EXPORTER_OTLP_ENDPOINT: expected an http:// or https:// URL, got "
            "'collector:4318'",
        ),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_CAPTURE_CONTENT": "yes"},
            "OTEL_CAPTURE_CONTENT: expected true or false, got 'yes'",
        ),
        (
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            },
            "OTEL_EXPORTER_OTLP_PROTOCOL: only http/protobuf is supported (the `otel` extra), "
            "got 'grpc'",
        ),
    ],
    ids=["not-a-url", "capture-yes", "grpc"],
)
def test_a_tracing_mistake_is_one_config_error(env: dict[str, str], expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        start_tracing(env)
    assert str(info.value) == expected


@pytest.mark.parametrize(
    ("url", "kind", "provider", "address", "port"),
    [
        ("https://api.openai.com/v1", "openai", "openai", "api.openai.com", 443),
        ("https://api.anthropic.com", "anthropic", "anthropic", "api.anthropic.com", 443),
        ("https://api.deepseek.com/anthropic", "anthropic", "deepseek", "api.deepseek.com", 443),
        (
            "https://team.openai.azure.com/openai",
            "openai",
            "azure.ai.openai",
            "team.openai.azure.com",
            443,
        ),
        ("http://127.0.0.1:11434/v1", "openai", "openai", "127.0.0.1", 11434),
        ("https://gateway.example/anthropic", "anthropic", "anthropic", "gateway.example", 443),
        (None, None, "tgbot.offline", None, None),
    ],
)
def test_the_provider_is_named_as_the_conventions_list_it(
    url: str | None, kind: str | None, provider: str, address: str | None, port: int | None
) -> None:
    served = served_by(url, kind)
    assert (served.provider, served.address, served.port) == (provider, address, port)

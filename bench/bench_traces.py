"""CPU and system calls of writing model calls' traces (`bot.agent.trace_writer.TraceWriter`).

Run: `.venv/bin/python -m bench.bench_traces [--calls 4000] [--chats 200] [--tools 0.2]
[--gap MS] [--module PATH]`; under `strace -c -f` to count the system calls.

The load of `bench/bench_cpu.py`, without the bot around it: `chats` chats at once, each
publishing its next call once the previous one is written, so the traces of calls that end
together share a trip to the worker thread as in the bot. Each call carries a request body
as the provider sent it (a system prompt, 20 messages of history, three tool schemas: about
10 KB of JSON, different in every call) and a short reply; a share `--tools` of the turns
first makes a call that asks for a tool, whose trace waits for the next call. The events are
built before the clock starts; measured: the process's CPU (every thread: the event loop
building each trace, the worker encoding, compressing and writing it) per call, and the
files written. `--module` loads `TraceWriter` from another copy of `bot/agent/trace_writer.py`
(e.g. main's, to compare).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import random
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from adapters.llm.scripted import ScriptedModel
from bot.agent.events import ModelCalled
from bot.agent.routes import ModelRoute, Prices
from bot.agent.trace_writer import TraceWriter
from bot.agent.traces import new_call_id
from bot.context.tokens import RequestTokens
from bot.domain.ids import SessionKey
from bot.domain.messages import ChatMessage, ToolCall
from bot.ports import LLMRequest, LLMResponse, SentBody, SessionInfo, Usage

START = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
ROUTE = ModelRoute(
    profile="main",
    model="gpt-bench",
    provider=ScriptedModel(),
    context_window=128_000,
    prices=Prices(input_per_mtok=2.0, cached_input_per_mtok=0.5, output_per_mtok=8.0),
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name}: " + "what it does and when to use it. " * 12,
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string", "description": "what to look for"}},
                "required": ["query"],
            },
        },
    }
    for name in ("search_history", "inspect_conversation_reference", "delete_message")
]
SYSTEM = "You are Helper, a Telegram bot. " + "Rules of the chat and how to answer. " * 80
WORDS = [
    "the",
    "deploy",
    "plan",
    "needs",
    "one",
    "more",
    "check",
    "before",
    "friday",
    "and",
    "the",
    "numbers",
    "look",
    "fine",
]


def _body(rng: random.Random, chat: int, n: int, tool_result: bool) -> bytes:
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    for i in range(20):
        text = " ".join(rng.choices(WORDS, k=rng.randint(5, 40)))
        role = "user" if i % 2 == 0 else "assistant"
        messages.append({"role": role, "content": f"[id:m{n + i};chat:{chat}] {text}"})
    if tool_result:
        call = {"id": "call_1", "type": "function", "function": {"name": "search_history"}}
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": "call_1", "content": "found: m3"})
    body = {"model": "gpt-bench", "messages": messages, "tools": TOOLS, "stream": True}
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def _call(
    rng: random.Random, chat: int, n: int, *, turn: str, asks: bool, answers: bool
) -> ModelCalled:
    at = START + timedelta(seconds=n)
    messages: tuple[ChatMessage, ...] = (ChatMessage(role="user", content="hi"),)
    if answers:
        messages += (
            ChatMessage(role="tool", content="found: m3", tool_call_id="call_1", name="search"),
        )
    tool_calls = (ToolCall(id="call_1", name="search_history", arguments='{"query":"x"}'),)
    response = LLMResponse(
        text="" if asks else " ".join(rng.choices(WORDS, k=30)),
        tool_calls=tool_calls if asks else (),
        usage=Usage(input_tokens=3000, output_tokens=60, cached_tokens=2500),
        finish_reason="tool_calls" if asks else "stop",
        sent=SentBody(dialect="openai", body=_body(rng, chat, n, answers)),
    )
    return ModelCalled(
        at=at,
        session=SessionInfo(id=chat, key=SessionKey(chat_id=chat), scene="private"),
        turn_id=turn,
        iteration=2 if answers else 1,
        final=False,
        route=ROUTE,
        usage=response.usage,
        tool_calls=len(response.tool_calls),
        error=None,
        latency_ms=40,
        fixed_tokens=900,
        tokens=RequestTokens(history=2000, current=40, images=0, messages=2040),
        trims=(),
        budget=100_000,
        history_budget=6000,
        kept_turns=10,
        dropped_turns=0,
        call_id=new_call_id(at),
        request=LLMRequest(model="gpt-bench", messages=messages),
        response=response,
    )


def build_calls(calls: int, chats: int, tools: float, seed: int = 1) -> list[list[ModelCalled]]:
    """Each chat's calls in order; a turn that asks for a tool is two calls."""
    rng = random.Random(seed)
    per_chat: list[list[ModelCalled]] = [[] for _ in range(chats)]
    n = 0
    while n < calls:
        chat = n % chats
        turn = f"t{n}"
        if rng.random() < tools and n + 1 < calls:
            per_chat[chat].append(_call(rng, chat, n, turn=turn, asks=True, answers=False))
            per_chat[chat].append(_call(rng, chat, n + 1, turn=turn, asks=False, answers=True))
            n += 2
        else:
            per_chat[chat].append(_call(rng, chat, n, turn=turn, asks=False, answers=False))
            n += 1
    return per_chat


def load_writer(module: str | None) -> Callable[..., Any]:
    if module is None:
        return TraceWriter
    spec = importlib.util.spec_from_file_location("bench_other_traces", module)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {module}")
    other = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(other)
    return other.TraceWriter  # type: ignore[no-any-return]


async def run(per_chat: list[list[ModelCalled]], writer: Any, gap: float = 0.0) -> None:
    async def chat(calls: list[ModelCalled]) -> None:
        for call in calls:
            await writer.on_model_call(call)
            if gap:
                await asyncio.sleep(gap)

    await asyncio.gather(*(chat(calls) for calls in per_chat))
    flush = getattr(writer, "flush", None)
    if flush is not None:
        await flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=4000)
    parser.add_argument("--chats", type=int, default=200)
    parser.add_argument("--tools", type=float, default=0.2, help="share of tool-calling turns")
    parser.add_argument(
        "--gap", type=float, default=0.0, help="ms each chat waits between calls (0: none)"
    )
    parser.add_argument(
        "--module", help="another bot/agent/trace_writer.py to load TraceWriter from"
    )
    args = parser.parse_args()
    per_chat = build_calls(args.calls, args.chats, args.tools)
    total = sum(len(calls) for calls in per_chat)
    kind = load_writer(args.module)
    with tempfile.TemporaryDirectory(prefix="bench-traces-") as tmp:
        writer = kind(Path(tmp))
        cpu, wall = time.process_time(), time.perf_counter()
        asyncio.run(run(per_chat, writer, args.gap / 1000))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        files = [p for p in Path(tmp).rglob("*") if p.is_file()]
        size = sum(p.stat().st_size for p in files)
    print(f"traces module: {args.module or 'bot/agent/trace_writer.py'}")
    print(
        f"{total:,} calls: CPU {cpu:.3f} s ({cpu / total * 1e3:.3f} ms per call), "
        f"wall {wall:.2f} s; {len(files):,} files, {size / 1e6:.1f} MB"
    )


if __name__ == "__main__":
    main()

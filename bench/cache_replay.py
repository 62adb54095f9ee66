"""The provider-cache bench: our runtime's requests on the workload (`bench.economy`),
replayed through every provider's cache model (`bench.cache_sim`)."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

from bench.cache_sim import (
    CacheBench,
    Prefixes,
    cache_markdown,
    provider_rows,
    request_prefixes,
    with_wire_reasoning,
)
from bench.economy import run_ours, tool_schema
from bench.workload import generate
from bot.context.tool_schema_cost import estimate_tool_schema_tokens
from bot.ports import LLMRequest


def run(size: int = 400, seed: int = 43, *, thinking: bool = False) -> CacheBench:
    """`thinking`: the same workload with reasoning on every answer, sent back by the
    providers' rules (the reasoning rows)."""
    return asyncio.run(_replay_workload(size, seed, thinking=thinking))


async def _replay_workload(size: int, seed: int, *, thinking: bool = False) -> CacheBench:
    workload = generate(size, seed)
    with tempfile.TemporaryDirectory(prefix="tgbot-bench-cache-") as tmp:
        variant, _ = await run_ours(workload, Path(tmp) / "default", thinking=thinking)
    start = variant.sent[0][0]
    sent: list[tuple[float, LLMRequest, Prefixes]] = []
    keyed: list[tuple[float, LLMRequest, Prefixes]] = []
    for at, request in variant.sent:
        if thinking:
            request = with_wire_reasoning(request)
        schemas = [tool_schema(s) for s in request.tools]
        tools_text = json.dumps(schemas, ensure_ascii=False, sort_keys=True)
        tools_tokens = estimate_tool_schema_tokens(schemas)
        seconds = (at - start).total_seconds()
        prefixes = request_prefixes(
            request.messages, tools_text=tools_text, tools_tokens=tools_tokens
        )
        sent.append((seconds, request, prefixes))
        choice = request.tool_choice or ""
        if choice:
            prefixes = request_prefixes(
                request.messages,
                tools_text=tools_text,
                tools_tokens=tools_tokens,
                messages_key=f"tool_choice={choice}",
            )
        keyed.append((seconds, request, prefixes))
    first_tools = [tool_schema(s) for s in variant.sent[0][1].tools]
    rows = provider_rows(
        sent, json.dumps(first_tools, ensure_ascii=False, sort_keys=True), anthropic_sent=keyed
    )
    markdown = cache_markdown(len(sent), rows)
    return CacheBench(requests=len(sent), rows=rows, markdown=markdown, messages=size)


if __name__ == "__main__":
    result = run()
    print(result.markdown)
    for label, value, ok in result.targets():
        print(f"| {label} | {value} | {'figure' if ok is None else 'PASS' if ok else 'FAIL'} |")

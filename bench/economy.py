"""Token economy and prefix caching on the ADR-shaped workload, three ways side by side.

(a) legacy: every user message is stored with the per-turn context of its moment; a request
    is the system prompt plus the last 100 stored messages, identical context-ref blocks
    (skill notes, workspace rules, tool index) shown once (the ADR's "相同则投影去重"); a quote
    is stored as a reference id, so the model spends one inspect call per quoted turn.
(b) LangChain `trim_messages` (strategy "last", 8,000 tokens, our estimate as the counter)
    over the same stored messages before the current turn; the current turn goes in whole.
(c) ours: the real runtime (`build_app` over `InMemoryStore`, a scripted model that calls a
    bench tool on the tool-using turns); numbers come from the requests the model received.

Every variant offers the same tool schemas (ours, plus the bench tool) and the same system
prompt, and is fed to its own `PrefixCache`.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from adapters.llm.scripted import CallTool, Reply, ScriptedModel, Step, is_summary_request
from bench.cache_sim import CacheResult, PrefixCache, hit_rate, serialize
from bench.fakes import CountingMessenger, SetClock
from bench.workload import (
    BOT_ID,
    BOT_NAME,
    CHAT_ID,
    ChatEvent,
    Workload,
    quote_summary,
    tool_output,
)
from bot.agent.ledger_read import read_entries
from bot.agent.system_prompt import PromptFacts, build_system_prompt
from bot.app.wiring import build_app
from bot.config import load_settings
from bot.context.compaction import newest_lines_within
from bot.context.history_trim import BREADCRUMB_TEXT
from bot.context.history_trimmed import HistoryTrimmed
from bot.context.tokens import (
    estimate_history_tokens,
    estimate_message_tokens,
)
from bot.context.tool_schema_cost import estimate_tool_schema_tokens
from bot.domain.facts import InboundMessage, Media, Quote
from bot.domain.messages import ChatMessage, Reasoning, ToolCall
from bot.ports import LLMRequest, LLMResponse, MediaFiles, TextSink, ToolSpec
from bot.tools import default_tools
from bot.tools.base import Tool, ToolContext
from testkit.memory_store import InMemoryStore

HISTORY_BUDGET = 8_000
LEGACY_LAST = 100
SUMMARY_THRESHOLD = 50
SUMMARY_TOKENS = 600
SUMMARY_MARK = "[Earlier conversation summary]"
CACHED_WEIGHT = 0.25  # a cached input token bills as a quarter of an uncached one
PRICE_INPUT = 0.28  # example prices, dollars per million input tokens
PRICE_CACHED = 0.028
RAISED_CAPS = 400
TOOL_NAME = "workspace_lookup"
_CONTEXT_REFS = ("skill:notes", "workspace-rules", "deferred-tools")
_TURN_MARK = "\n[Turn context]\n"


@dataclass(frozen=True, slots=True, kw_only=True)
class Call:
    """One model request as measured."""

    messages: tuple[ChatMessage, ...]
    current: int  # index of the message that opens the current turn
    schema_tokens: int
    purpose: str = "turn"  # or "summary": a legacy compaction call

    @property
    def input_tokens(self) -> int:
        return estimate_history_tokens(self.messages) + self.schema_tokens

    @property
    def history_tokens(self) -> int:
        return sum(
            estimate_message_tokens(m) for m in self.messages[: self.current] if m.role != "system"
        )

    @property
    def history_messages(self) -> int:
        return sum(1 for m in self.messages[: self.current] if m.role in ("user", "assistant"))


@dataclass(slots=True, kw_only=True)
class Variant:
    name: str
    calls: list[Call] = field(default_factory=list)
    cache: list[CacheResult] = field(default_factory=list)
    prefix_breaks: int = 0
    quote_calls: int = 0
    window_moves: int = 0
    compaction_calls: int = 0
    compaction_hit: float = 0.0
    compaction_share: float = 0.0
    sync_folds: int = 0
    notes: dict[str, str] = field(default_factory=dict)
    sent: list[tuple[datetime, LLMRequest]] = field(default_factory=list)
    """Every request the model received (summaries too), with the clock when the
    inbound message that caused it was handled (`bench/cache_replay.py` replays them)."""


# ---------------------------------------------------------------------- the bench tool


def _bench_tool(seed: int) -> Tool:
    async def run(args: Mapping[str, Any], ctx: ToolContext) -> str:
        return tool_output(seed, int(args["call"]), int(args["chars"]))

    return Tool(
        spec=ToolSpec(
            name=TOOL_NAME,
            description="Search the workspace (files, logs, docs) and return what matched.",
            parameters={
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "call": {"type": "integer"},
                    "chars": {"type": "integer"},
                },
                "required": ["query"],
            },
        ),
        run=run,
        summary=f"{TOOL_NAME}(query) — search workspace files, logs and docs",
    )


def _calls_for(event: ChatEvent, first_call: int) -> list[tuple[int, int]]:
    """(call number, output size) of each tool call of the turn."""
    return [(first_call + i, size) for i, size in enumerate(event.tool_outputs)]


# ---------------------------------------------------------------------- (c) ours


def rules_file_text(workload: Workload, runtime_index_chars: int) -> str:
    """Skill notes + workspace rules + padding to the ADR's tool-index size (the runtime
    prints its own tool index as well; together they are as long as the ADR's)."""
    per_turn = workload.per_turn
    pad = per_turn.tool_indexes[0][: max(0, 2_922 - runtime_index_chars)]
    return "\n\n".join([per_turn.skill_notes, per_turn.workspace_rules, pad])


class ThinkingScriptedModel(ScriptedModel):
    """The scripted model with reasoning on every answer (about 150 tokens of it, signed
    like Anthropic's thinking blocks), as today's models give it."""

    async def complete(
        self, request: LLMRequest, *, on_text: TextSink | None = None
    ) -> LLMResponse:
        response = await super().complete(request, on_text=on_text)
        number = len(self.requests)
        text = f"思考 {number}: " + "weighing what the members said. " * 20
        block = {"type": "thinking", "thinking": text, "signature": f"sig-{number:06d}" * 8}
        payload = json.dumps([block], ensure_ascii=False)
        return replace(
            response, reasoning=Reasoning(format="anthropic", text=text, payload=payload)
        )


async def run_ours(
    workload: Workload,
    workdir: Path,
    *,
    caps: int | None = None,
    overrides: Mapping[str, Any] | None = None,
    thinking: bool = False,
    photos: Callable[[ChatEvent], tuple[Media, ...]] | None = None,
    files: MediaFiles | None = None,
    vision: bool = False,
) -> tuple[Variant, list[LLMRequest]]:
    """Drive the real runtime; `caps` raises the turn and message caps of the window;
    `thinking`: every answer comes with reasoning, kept and sent back as a provider's is;
    `photos` gives the photos a message carries (`bench/bench_images.py`), `files` fetches
    them, `vision` says the route sees images."""
    model = ThinkingScriptedModel() if thinking else ScriptedModel()
    messenger = CountingMessenger()
    clock = SetClock(workload.events[0].at)
    store = InMemoryStore(clock=clock)
    tool = _bench_tool(workload.seed)
    # the runtime prints its own tool index too; size the padding to it
    tools = (*default_tools(), tool)
    index_chars = sum(len(t.summary) + 3 for t in tools if t.summary) + len("[Tool index]")
    rules = _write_rules(workdir, rules_file_text(workload, index_chars))
    extra = dict(overrides or {})
    settings = load_settings(
        data_dir=workdir,
        bot_locale="zh",
        history={"group_tokens": HISTORY_BUDGET}
        | ({"max_history_turns": caps, "max_recent_messages": caps} if caps else {})
        | extra.pop("history", {}),
        **extra,
        triggers={"merge_window_seconds": 0},
        security={"user_messages_per_minute": 0, "chat_messages_per_minute": 0},
        workspace_rules_file=rules,
        llm_vision=vision,
    )
    app = build_app(
        settings,
        store=store,
        messenger=messenger,
        bot_id=BOT_ID,
        bot_name=BOT_NAME,
        clock=clock,
        offline=model,
    )
    app.runner.tools[TOOL_NAME] = tool
    if files is not None and app.runner.request.images is not None:
        app.runner.request.images.files = files
    moves: list[HistoryTrimmed] = []
    app.bus.subscribe(moves.append)
    variant = Variant(name="ours" if caps is None else "ours_caps")
    quoted_inline = quoted_reply_to = quoted_missing = 0
    tool_call = 0
    answered = 0
    by_index = {e.index: e for e in workload.events}
    for event in workload.events:
        clock.current = event.at
        messenger.now = event.at
        quote = None
        if event.quote is not None:
            target = by_index[event.quote.target]
            summary, truncated = quote_summary(target.text)
            quote = Quote(
                id=target.message_id,
                sender_id=target.sender.id,
                timestamp=target.at,
                summary=summary,
                truncated=truncated,
                chat_id=CHAT_ID,
            )
        if event.addressed:
            steps: list[Step] = []
            for number, size in _calls_for(event, tool_call):
                args = {"query": event.text[:40], "call": number, "chars": size}
                steps.append(CallTool(TOOL_NAME, args))
            tool_call += len(event.tool_outputs)
            steps.append(Reply(event.reply))
            model.add(*steps)
            first_request = len(model.requests)
        message = InboundMessage(
            chat_id=CHAT_ID,
            chat_type="supergroup",
            message_id=event.message_id,
            date=event.at,
            sender=event.sender,
            text=event.text,
            quote=quote,
            mentions_bot=event.addressed,
            media=photos(event) if photos is not None else (),
        )
        await app.inbound.on_message(message)
        await app.inbound.drain()
        variant.sent += [(event.at, r) for r in model.requests[len(variant.sent) :]]
        if event.addressed:
            assert model.remaining == 0, "the turn did not use its whole script"
            assert messenger.sent > answered, f"message {event.index} was not answered"
            answered = messenger.sent
            if event.quote is not None:
                current = model.requests[first_request].messages[-1].content
                header = current.split("\n", 1)[0]
                if "reply_to:" in header:
                    quoted_reply_to += 1
                elif "\n[quote " in "\n" + current:
                    quoted_inline += 1
                else:
                    quoted_missing += 1
    entries = list(read_entries(settings.traces_dir))
    reported_input = sum(e.input_tokens or 0 for e in entries)
    reported_cached = sum(e.cached_tokens or 0 for e in entries)
    variant.window_moves = len(moves)
    variant.notes = {
        "quotes": f"{quoted_reply_to} reply_to, {quoted_inline} inline, {quoted_missing} missing",
        "scripted_cache": f"{reported_cached / reported_input:.1%}" if reported_input else "-",
        "per_turn_chars": str(_per_turn_chars(model.requests)),
        "system_chars": str(len(model.requests[0].messages[0].content)),
    }
    await app.runner.aclose()
    replies = [r for r in model.requests if not is_summary_request(r)]
    summaries = [e for e in entries if e.purpose == "compaction"]
    variant.compaction_calls = len(summaries)
    summary_input = sum(e.input_tokens or 0 for e in summaries)
    summary_cached = sum(e.cached_tokens or 0 for e in summaries)
    variant.compaction_hit = summary_cached / summary_input if summary_input else 0.0
    variant.compaction_share = (
        _billable(summary_input, summary_cached) / _billable(reported_input, reported_cached)
        if reported_input
        else 0.0
    )
    compactor = app.runner.compactor
    variant.sync_folds = compactor.sync_folds if compactor is not None else 0
    for request in replies:
        schema = estimate_tool_schema_tokens([tool_schema(s) for s in request.tools])
        variant.calls.append(
            Call(messages=request.messages, current=_current_of(request), schema_tokens=schema)
        )
    await app.routes.aclose()
    return variant, replies


def _billable(input_tokens: int, cached_tokens: int) -> float:
    """Billable-equivalent input: uncached + 0.25 × cached."""
    return (input_tokens - cached_tokens) + 0.25 * cached_tokens


def _write_rules(workdir: Path, text: str) -> Path:
    workdir.mkdir(parents=True)
    rules = workdir / "AGENTS.md"
    rules.write_text(text, encoding="utf-8")
    return rules


def tool_schema(spec: ToolSpec) -> dict[str, object]:
    return {"name": spec.name, "description": spec.description, "parameters": spec.parameters}


def _current_of(request: LLMRequest) -> int:
    for index in range(len(request.messages) - 1, -1, -1):
        message = request.messages[index]
        if message.role == "user" and _TURN_MARK in message.content:
            return index
    return len(request.messages) - 1


def _per_turn_chars(requests: Sequence[LLMRequest]) -> int:
    if not requests:
        return 0
    current = requests[0].messages[_current_of(requests[0])].content
    return len(current) - current.index(_TURN_MARK)


# ---------------------------------------------------------------------- (a)/(b) legacy


@dataclass(frozen=True, slots=True)
class _Stored:
    """A legacy stored message: parts keyed by context-ref key (None: plain text)."""

    role: str
    parts: tuple[tuple[str | None, str], ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None

    def full(self) -> ChatMessage:
        return self.render(set())

    def render(self, shown: set[tuple[str, str]]) -> ChatMessage:
        texts: list[str] = []
        for key, text in self.parts:
            if key in _CONTEXT_REFS:
                if (key, text) in shown:
                    continue
                shown.add((key, text))
            texts.append(text)
        return ChatMessage(
            role=self.role,  # type: ignore[arg-type]
            content="\n\n".join(texts),
            tool_calls=self.tool_calls,
            tool_call_id=self.tool_call_id,
        )


def _render_legacy(stored: Sequence[_Stored]) -> list[ChatMessage]:
    shown: set[tuple[str, str]] = set()
    return [m.render(shown) for m in stored]


def _legacy_user(workload: Workload, event: ChatEvent, turn: int) -> _Stored:
    at = event.at
    stamp = f"{at:%Y-%m-%dT%H:%M:%S}.{at.microsecond // 1000:03d}Z"
    header = (
        f"[id:{CHAT_ID}_{event.message_id};user:{event.sender.name};"
        f"user_id:{event.sender.id};time:{stamp};]"
    )
    parts: list[tuple[str | None, str]] = [(None, f"{header}\n{event.text}")]
    if event.quote is not None:
        target = 700_000 + event.quote.target * 3
        parts.append(
            (
                None,
                "[Untrusted conversation references]\n"
                f"- message id={CHAT_ID}_{target} reference=ref-1",
            )
        )
    per_turn = workload.per_turn
    parts += [
        ("turn", workload.turn_context(event, turn)),
        ("told", workload.told_user(event)),
        ("skill:notes", per_turn.skill_notes),
        ("workspace-rules", per_turn.workspace_rules),
        ("deferred-tools", workload.tool_index(turn)),
    ]
    return _Stored(role="user", parts=tuple(parts))


class _LangChainTrim:
    """`trim_messages` over a growing stored history; converted messages are kept per index."""

    def __init__(self) -> None:
        from langchain_core.messages import BaseMessage  # a bench-only dependency

        self._converted: list[Any] = []
        self._cost: dict[int, int] = {}
        self._index: dict[int, int] = {}

        def per_message(message: BaseMessage) -> int:
            return self._cost[id(message)]

        # LangChain detects a per-message counter by this annotation object
        per_message.__annotations__["message"] = BaseMessage
        self._counter = per_message

    def _convert(self, message: ChatMessage) -> Any:
        from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

        if message.role == "user":
            lc: Any = HumanMessage(content=message.content)
        elif message.role == "assistant":
            calls = [
                {"id": c.id, "name": c.name, "args": json.loads(c.arguments)}
                for c in message.tool_calls
            ]
            lc = AIMessage(content=message.content, tool_calls=calls)
        else:
            lc = ToolMessage(content=message.content, tool_call_id=message.tool_call_id or "")
        self._cost[id(lc)] = estimate_message_tokens(message)
        return lc

    def keep(self, history: Sequence[ChatMessage]) -> list[int]:
        """Indexes of `history` that LangChain keeps within the budget. `history` only
        grows between calls (its first messages are the ones converted before)."""
        from langchain_core.messages import trim_messages

        while len(self._converted) < len(history):
            lc = self._convert(history[len(self._converted)])
            self._index[id(lc)] = len(self._converted)
            self._converted.append(lc)
        kept = trim_messages(
            self._converted[: len(history)],
            max_tokens=HISTORY_BUDGET,
            token_counter=self._counter,
            strategy="last",
            start_on="human",
            include_system=False,
            allow_partial=False,
        )
        return [self._index[id(m)] for m in kept]


def _short_header(event: ChatEvent, alias: int) -> str:
    """A conversation-only header like ours (alias, sender, minute)."""
    return (
        f"[id:m{alias};user:{event.sender.name};user_id:{event.sender.id};time:{event.at:%H:%M};]"
    )


def _turn_block(event: ChatEvent) -> str:
    """The per-turn context a conversation-only bot puts on the current message only."""
    return (
        f"\n\n[Turn context]\ntime: {event.at:%Y-%m-%d %H:%M} UTC\n"
        "model: deepseek-chat\nlanguage: zh-CN\nscene: group"
    )


@dataclass(slots=True)
class _Summary:
    """The legacy bot's rolling summary (`summaryThreshold: 50`), see `_LegacyBaseline`."""

    text: str = ""
    upto: int = 0  # stored messages before this index are folded in
    said: list[str] = field(default_factory=list)

    def message(self) -> ChatMessage | None:
        if not self.text:
            return None
        return ChatMessage(role="user", content=f"{SUMMARY_MARK}\n{self.text}")


def _bounded(lines: Sequence[str]) -> str:
    """The newest lines whose estimate fits `SUMMARY_TOKENS`."""
    return newest_lines_within(lines, SUMMARY_TOKENS)


def _run_legacy(
    workload: Workload,
    system: ChatMessage,
    conversation_system: ChatMessage,
    schema_tokens: int,
    tools_prefix: str,
) -> dict[str, Variant]:
    """Every baseline over one pass of the workload (they see the same messages)."""
    run = _LegacyRun(workload, system, conversation_system, schema_tokens)
    for event in workload.events:
        run.event(event)
    variants = run.variants()
    for variant in variants:
        feed_cache(variant, tools_prefix)
    return {v.name: v for v in variants}


class _LegacyRun:
    """The baselines' pass over the workload: the legacy bot's storage (per-turn context in
    every row), LangChain's trims over it, and conversation-only storage of the same chat."""

    def __init__(
        self,
        workload: Workload,
        system: ChatMessage,
        conversation_system: ChatMessage,
        schema_tokens: int,
    ) -> None:
        self.workload = workload
        self.system = system
        self.conversation_system = conversation_system
        self.schema_tokens = schema_tokens
        self.resliced = Variant(name="legacy_resliced")
        self.held = Variant(name="legacy_held")
        self.summarised = Variant(name="legacy_summary")
        self.lc_legacy = Variant(name="langchain_legacy")
        self.lc_conv = Variant(name="langchain_conv")
        self.trim_legacy = _LangChainTrim()
        self.trim_conv = _LangChainTrim()
        self.stored: list[_Stored] = []  # the legacy bot's storage (per-turn context in every row)
        self.full_rows: list[ChatMessage] = []  # each stored row as LangChain is given it
        self.said: list[str] = []  # per stored row: what a person or the bot said (summary)
        self.conv: list[ChatMessage] = []  # conversation-only storage of the same chat
        self.summary = _Summary()
        self.window_start = 0  # the held window's first stored index, fixed for the turn
        self.conv_turn_start = 0
        self.turn = 0
        self.tool_call = 0
        self.call_ids = 0
        self.alias = 0
        self.by_index = {e.index: e for e in workload.events}

    def variants(self) -> tuple[Variant, ...]:
        return (self.resliced, self.held, self.summarised, self.lc_legacy, self.lc_conv)

    def event(self, event: ChatEvent) -> None:
        workload = self.workload
        self.add(
            _legacy_user(workload, event, self.turn), f"{event.sender.name}: {event.text[:60]}"
        )
        self.alias += 1
        body = f"{_short_header(event, self.alias)}\n{event.text}"
        if event.quote is not None:
            # conversation-only storage keeps the quote fact: one inline line, no tool call
            target = self.by_index[event.quote.target]
            line, _ = quote_summary(target.text)
            body = (
                f"{_short_header(event, self.alias)}\n[quote id:m{target.index + 1};"
                f"user_id:{target.sender.id};] {line}\n{event.text}"
            )
        self.conv.append(ChatMessage(role="user", content=body))
        if not event.addressed:
            return
        self.begin_turn(event)
        if event.quote is not None:
            self.quote_round(self.by_index[event.quote.target])
        for number, size in _calls_for(event, self.tool_call):
            self.request()
            args = {"query": event.text[:40], "call": number, "chars": size}
            output = tool_output(workload.seed, number, size)
            self.tool_round(TOOL_NAME, args, output, legacy_only=False)
        self.tool_call += len(event.tool_outputs)
        self.request()
        self.add(
            _Stored(role="assistant", parts=((None, event.reply),)),
            f"{BOT_NAME}: {event.reply[:60]}",
        )
        self.alias += 1
        self.end_turn()
        self.conv.append(ChatMessage(role="assistant", content=f"{event.reply}"))
        self.turn += 1

    def quote_round(self, target: ChatEvent) -> None:
        """The legacy storage spends one call (and a tool round) on a quote."""
        self.request(legacy_only=True)
        reference = {"reference": "ref-1", "depth": 0}
        self.tool_round(
            "inspect_conversation_reference",
            reference,
            json.dumps({"sender": target.sender.name, "text": target.text}, ensure_ascii=False),
            legacy_only=True,
        )
        for variant in (self.resliced, self.held, self.summarised, self.lc_legacy):
            variant.quote_calls += 1

    def add(self, row: _Stored, line: str) -> None:
        self.stored.append(row)
        self.full_rows.append(row.full())
        self.said.append(line)

    def legacy_start(self) -> int:
        stored = self.stored
        start = max(0, len(stored) - LEGACY_LAST)
        while start < len(stored) and stored[start].role == "tool":
            start += 1
        return start

    def legacy_call(self, variant: Variant, start: int, lead: Sequence[ChatMessage]) -> None:
        stored = self.stored
        turn_start = max(i for i, m in enumerate(stored) if m.role == "user")
        window = _render_legacy(stored[start:])
        messages = (self.system, *lead, *window)
        current = 1 + len(lead) + (turn_start - start)
        variant.calls.append(
            Call(messages=messages, current=current, schema_tokens=self.schema_tokens)
        )

    def begin_turn(self, event: ChatEvent) -> None:
        self.window_start = self.legacy_start()
        self.conv_turn_start = len(self.conv) - 1
        if self.window_start - self.summary.upto >= SUMMARY_THRESHOLD:
            self.fold(self.window_start)
        # the conversation-only bot: the current message carries this turn's context
        conv = self.conv
        conv[-1] = replace(conv[-1], content=conv[-1].content + _turn_block(event))

    def end_turn(self) -> None:
        current = self.conv[self.conv_turn_start]
        self.conv[self.conv_turn_start] = replace(
            current, content=current.content.split("\n\n[Turn ")[0]
        )

    def fold(self, upto: int) -> None:
        """One summary call over the messages that left the window since the last one."""
        summary = self.summary
        departing = _render_legacy(self.stored[summary.upto : upto])
        lead = [m for m in (summary.message(),) if m is not None]
        instruction = ChatMessage(
            role="user",
            content=f"Summarise the conversation above in at most {SUMMARY_TOKENS} tokens.",
        )
        messages = (self.system, *lead, *departing, instruction)
        self.summarised.calls.append(
            Call(
                messages=messages,
                current=len(messages) - 1,
                schema_tokens=self.schema_tokens,
                purpose="summary",
            )
        )
        summary.said += [line for line in self.said[summary.upto : upto] if line]
        summary.text = _bounded(summary.said)
        summary.upto = upto

    def request(self, *, legacy_only: bool = False) -> None:
        stored, schema_tokens = self.stored, self.schema_tokens
        self.legacy_call(self.resliced, self.legacy_start(), ())
        self.legacy_call(self.held, self.window_start, ())
        lead = [m for m in (self.summary.message(),) if m is not None]
        self.legacy_call(self.summarised, self.window_start, lead)
        turn_start = max(i for i, m in enumerate(stored) if m.role == "user")
        kept = [stored[i] for i in self.trim_legacy.keep(self.full_rows[:turn_start])]
        messages_b = [self.system, *_render_legacy(kept + stored[turn_start:])]
        self.lc_legacy.calls.append(
            Call(messages=tuple(messages_b), current=len(kept) + 1, schema_tokens=schema_tokens)
        )
        if legacy_only:
            return
        history = self.conv[: self.conv_turn_start]
        kept_conv = [history[i] for i in self.trim_conv.keep(history)]
        messages_c = (self.conversation_system, *kept_conv, *self.conv[self.conv_turn_start :])
        self.lc_conv.calls.append(
            Call(messages=messages_c, current=len(kept_conv) + 1, schema_tokens=schema_tokens)
        )

    def tool_round(
        self, name: str, args: dict[str, Any], result: str, *, legacy_only: bool
    ) -> None:
        self.call_ids += 1
        call = ToolCall(id=f"call_{self.call_ids}", name=name, arguments=json.dumps(args))
        self.add(_Stored(role="assistant", tool_calls=(call,)), "")
        self.add(_Stored(role="tool", parts=((None, result),), tool_call_id=call.id), "")
        if not legacy_only:
            self.conv.append(ChatMessage(role="assistant", tool_calls=(call,)))
            self.conv.append(ChatMessage(role="tool", content=result, tool_call_id=call.id))


# ---------------------------------------------------------------------- measuring


def feed_cache(variant: Variant, tools_prefix: str) -> None:
    cache = PrefixCache()
    previous: list[str] | None = None
    for call in variant.calls:
        variant.cache.append(cache.send(tools_prefix, call.messages))
        if call.purpose != "turn":
            continue
        sent = [serialize(m) for m in call.messages]
        if previous is not None and sent[: len(previous)] != previous:
            variant.prefix_breaks += 1
        previous = sent[: call.current]


def _pct(values: Sequence[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _visible(call: Call) -> int:
    """Conversation messages the model sees before the current turn (no system rows,
    breadcrumb or summary; a tool result is part of its call, not a message people wrote)."""
    return sum(
        1
        for m in call.messages[: call.current]
        if m.role in ("user", "assistant")
        and not m.is_breadcrumb
        and not m.tool_calls
        and not m.content.startswith((SUMMARY_MARK, BREADCRUMB_TEXT))
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Figures:
    calls: int
    summary_calls: int
    p50: int
    p90: int
    max: int
    history_p50: int
    history_max: int
    visible_p50: float
    visible_min: int
    hit_rate: float
    prefix_breaks: int
    quote_calls: int
    window_moves: int
    billable_per_call: float  # uncached + 0.25 x cached, mean over every call
    billable_total: float  # summed over every call, summary calls included
    input_cost: float  # dollars at the example prices, every call


def figures(variant: Variant) -> Figures:
    turns = [c for c in variant.calls if c.purpose == "turn"]
    inputs = [c.input_tokens for c in turns]
    history = [c.history_tokens for c in turns]
    visible = [_visible(c) for c in turns]
    billable = 0.0
    cost = 0.0
    for call, cached in zip(variant.calls, variant.cache, strict=True):
        share = cached.cached_quarters / cached.input_quarters if cached.input_quarters else 0.0
        tokens = call.input_tokens
        billable += tokens * (1 - share) + CACHED_WEIGHT * tokens * share
        cost += (tokens * (1 - share) * PRICE_INPUT + tokens * share * PRICE_CACHED) / 1e6
    return Figures(
        calls=len(turns),
        summary_calls=len(variant.calls) - len(turns),
        p50=int(statistics.median(inputs)),
        p90=_pct(inputs, 0.9),
        max=max(inputs),
        history_p50=int(statistics.median(history)),
        history_max=max(history),
        visible_p50=statistics.median(visible),
        visible_min=min(visible),
        hit_rate=hit_rate(variant.cache),
        prefix_breaks=variant.prefix_breaks,
        quote_calls=variant.quote_calls,
        window_moves=variant.window_moves,
        billable_per_call=billable / len(turns),
        billable_total=billable,
        input_cost=cost,
    )


LABELS = {
    "legacy_resliced": "(a0) legacy, re-sliced every call (not how the ADR's bot works)",
    "legacy_held": "(a1) legacy: last 100 stored, held per turn",
    "legacy_summary": "(a2) legacy: (a1) + summaryThreshold 50",
    "langchain_legacy": "(b0) LangChain trim_messages 8k over legacy storage (storage format)",
    "langchain_conv": "(b1) LangChain trim_messages 8k, conversation-only storage",
    "ours": "(c) ours (real runtime, defaults)",
    "ours_caps": f"(c2) ours, turn/message caps {RAISED_CAPS}",
}
FAIR_LEGACY = ("legacy_held", "legacy_summary")


@dataclass(frozen=True, slots=True, kw_only=True)
class EconomyResult:
    workload: Workload
    rows: Mapping[str, Figures]
    notes: Mapping[str, str]
    markdown: str

    @property
    def ours(self) -> Figures:
        return self.rows["ours"]

    @property
    def ours_caps(self) -> Figures:
        return self.rows["ours_caps"]

    @property
    def legacy(self) -> Figures:
        """The fair legacy row the targets compare with: the better cache of (a1), (a2)."""
        return max((self.rows[n] for n in FAIR_LEGACY), key=lambda f: f.hit_rate)

    @property
    def legacy_name(self) -> str:
        return max(FAIR_LEGACY, key=lambda n: self.rows[n].hit_rate)

    @property
    def langchain(self) -> Figures:
        return self.rows["langchain_conv"]


async def _measure(workload: Workload) -> EconomyResult:
    with tempfile.TemporaryDirectory(prefix="tgbot-bench-economy-") as tmp:
        ours, requests = await run_ours(workload, Path(tmp) / "default")
    with tempfile.TemporaryDirectory(prefix="tgbot-bench-economy-") as tmp:
        raised, _ = await run_ours(workload, Path(tmp) / "caps", caps=RAISED_CAPS)
    tools = requests[0].tools
    tools_prefix = json.dumps([tool_schema(s) for s in tools], ensure_ascii=False, sort_keys=True)
    for variant in (ours, raised):
        feed_cache(variant, tools_prefix)
    # the legacy bot's system prompt has no rules: they ride in every stored user message
    system = ChatMessage(
        role="system",
        content=build_system_prompt(
            PromptFacts(
                bot_name=BOT_NAME,
                scene="group",
                locale="zh",
                tool_names=tuple(t.name for t in tools),
            )
        ),
    )
    # a conversation-only bot puts the stable rules and tool index where ours does
    conversation_system = requests[0].messages[0]
    schema = ours.calls[0].schema_tokens
    baselines = _run_legacy(workload, system, conversation_system, schema, tools_prefix)
    found = {name: figures(v) for name, v in baselines.items()}
    found["ours"] = figures(ours)
    found["ours_caps"] = figures(raised)
    rows = {name: found[name] for name in LABELS}
    markdown = _table(workload, rows, ours.notes)
    return EconomyResult(workload=workload, rows=rows, notes=ours.notes, markdown=markdown)


def _table(workload: Workload, found: Mapping[str, Figures], notes: Mapping[str, str]) -> str:
    events = workload.events
    texts = [len(e.text) for e in events]
    outputs = [s for e in events for s in e.tool_outputs]

    def calls(f: Figures) -> str:
        return f"{f.calls} + {f.summary_calls} summaries" if f.summary_calls else f"{f.calls}"

    row: Callable[[str, Figures], str] = lambda name, f: (  # noqa: E731
        f"| {LABELS[name]} | {calls(f)} | {f.p50:,} | {f.p90:,} | {f.max:,} "
        f"| {f.history_p50:,} | {f.history_max:,} | {f.visible_p50:.0f} ({f.visible_min}) "
        f"| {f.quote_calls} | {f.hit_rate:.1%} | {f.prefix_breaks} "
        f"| {f.billable_per_call:,.0f} | {f.billable_total / 1e6:.2f} M | ${f.input_cost:.3f} |"
    )
    summary = found["legacy_summary"]
    return "\n".join(
        [
            f"Workload (seed {workload.seed}): {len(events)} inbound messages from 5 people, "
            f"{workload.turns} addressed to the bot, {workload.tool_calls} tool calls "
            f"(outputs {min(outputs, default=0):,}–{max(outputs, default=0):,} chars), "
            f"{workload.quoted_turns} quoted turns; user text mean "
            f"{statistics.mean(texts):.0f} chars, median {statistics.median(texts):.0f}, "
            f"max {max(texts):,}. Per-turn context per message: legacy "
            f"{len(_legacy_user(workload, events[0], 0).full().content) - len(events[0].text):,}"
            f" chars; ours {notes['per_turn_chars']} chars of [Turn context] on the current "
            f"message only, the stable rules and tool index ({notes['system_chars']} chars with "
            "the prompt) in the system prompt.",
            "",
            "| variant | model calls | input p50 | input p90 | input max | history p50 "
            "| history max | conversation msgs visible p50 (min) | extra calls for quotes "
            "| cache hit | prefix breaks | billable-eq input / call | billable-eq total "
            "| input cost |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            *(row(name, found[name]) for name in LABELS),
            "",
            f"Tokens are `bot.context.tokens` estimates (input = messages + tool schemas). "
            f"Ours: window moved {found['ours'].window_moves} times (HistoryTrimmed events); "
            f"quoted turns rendered as {notes['quotes']}, so 0 extra calls; the scripted "
            f"model's own segment cache reported {notes['scripted_cache']} cached. "
            f"*Billable-equivalent input* = uncached + {CACHED_WEIGHT} × cached input tokens "
            "(cache hits from the simulator), the one number to compare window policies by; "
            f"*input cost* prices every call at example prices (${PRICE_INPUT} per million "
            f"uncached, ${PRICE_CACHED} cached; `bench/economy.py`); output tokens are the "
            f"same replies in every row and are left out. (a2)'s "
            f"{summary.summary_calls} summary calls are in its billable total and cost but not "
            "in the per-call columns.",
        ]
    )


def run(size: int = 400, seed: int = 43) -> EconomyResult:
    from bench.workload import generate

    return asyncio.run(_measure(generate(size, seed)))


if __name__ == "__main__":
    print(run().markdown)

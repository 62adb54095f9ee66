"""The wire options right for each provider's documented base URL, and a profile's options
over them (`options_for`), read once when the model routes are built.

`options_for` starts from `HOST_DEFAULTS` (keyed by the base URL's host) and lays the
profile's explicit settings over it. Sources:

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

from collections.abc import Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from adapters.llm.dialects import CacheMode, CacheTTL, Kind, MaxTokensParam, WireOptions
from bot.ports import ReasoningLevel

_OPENAI = WireOptions(
    prompt_cache_key=True,
    cache="breakpoints",
    cache_dialect="openai_breakpoint",
    reasoning_dialect="openai",
)
"""Explicit breakpoints go only to GPT-5.6 and later (decided per request, since `/model`
may switch a route's model); older models keep the automatic cache."""
_ANTHROPIC = WireOptions(kind="anthropic", cache="breakpoints")
_CACHE_CONTROL = WireOptions(cache="breakpoints", cache_dialect="cache_control")
_OPENROUTER = replace(_CACHE_CONTROL, reasoning_dialect="openrouter")

HOST_DEFAULTS: dict[str, WireOptions] = {
    "api.openai.com": _OPENAI,
    "api.deepseek.com": WireOptions(reasoning_dialect="deepseek"),
    "dashscope.aliyuncs.com": _CACHE_CONTROL,
    "dashscope-intl.aliyuncs.com": _CACHE_CONTROL,
    "dashscope-us.aliyuncs.com": _CACHE_CONTROL,
    "api.moonshot.ai": WireOptions(),
    "api.moonshot.cn": WireOptions(),
    "generativelanguage.googleapis.com": WireOptions(),
    "openrouter.ai": _OPENROUTER,
    "api.x.ai": WireOptions(conversation_header="x-grok-conv-id"),
    "localhost:11434": WireOptions(stream=True),
    "127.0.0.1:11434": WireOptions(stream=True),
    "api.anthropic.com": _ANTHROPIC,
}
"""Per host (with the port when it is not the scheme's default). DeepSeek's Anthropic-format
endpoint (`https://api.deepseek.com/anthropic`) is the same host: the kind decides."""


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
    reasoning: ReasoningLevel | None = None,
    extra_body: Mapping[str, Any] | None = None,
) -> WireOptions:
    """The host's defaults with every explicitly given setting laid over them."""
    host = host_of(base_url)
    kind = kind_for(base_url, kind)
    base = HOST_DEFAULTS.get(host, WireOptions())
    if kind == "anthropic" and base.kind != "anthropic":
        base = replace(_ANTHROPIC, reasoning_dialect=base.reasoning_dialect)
    elif kind == "openai" and base.kind != "openai":
        base = WireOptions()
    options = base
    overrides: dict[str, object] = {
        "cache": cache,
        "cache_ttl": cache_ttl,
        "prompt_cache_key": prompt_cache_key,
        "max_tokens_param": max_tokens_param,
        "stream": stream,
        "reasoning": reasoning,
        "extra_body": dict(extra_body) if extra_body else None,
    }
    given = {key: value for key, value in overrides.items() if value is not None}
    options = replace(options, **given)  # type: ignore[arg-type]
    return options


__all__ = ["HOST_DEFAULTS", "host_of", "kind_for", "options_for"]

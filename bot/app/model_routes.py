"""The model routes from the settings: each provider profile's adapter (its dialect and
options), prices, context window and tokenizer, and the `default` route from `LLM_*`."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from adapters.llm.anthropic_provider import AnthropicProvider
from adapters.llm.openai_provider import OpenAIProvider
from adapters.llm.provider_defaults import kind_for, options_for
from adapters.llm.scripted import ScriptedModel
from adapters.tokenizers import TokenizerUnavailable, load_token_counter
from bot.agent.fallback import FallbackChains
from bot.agent.routes import Prices, ProfileEntry, RouteTable
from bot.config import ProviderProfile, Settings
from bot.context.window import ProfileCapacity
from bot.errors import ConfigError
from bot.ports import LLMProvider


def build_provider(
    profile: ProviderProfile, api_key: str | None, *, timeout: float, max_retries: int
) -> OpenAIProvider:
    """The adapter of the profile's kind, speaking the dialect of its host and settings."""
    options = options_for(
        profile.base_url,
        kind=profile.kind,
        cache=profile.cache,
        cache_ttl=profile.cache_ttl,
        prompt_cache_key=profile.prompt_cache_key,
        max_tokens_param=profile.max_tokens_param,
        stream=profile.stream,
        reasoning=profile.reasoning,
        extra_body=profile.extra_body,
    )
    adapter = AnthropicProvider if options.kind == "anthropic" else OpenAIProvider
    return adapter(
        profile.base_url, api_key, timeout=timeout, max_retries=max_retries, options=options
    )


def build_routes(settings: Settings, *, offline: LLMProvider | None = None) -> RouteTable:
    """Provider profiles from the TOML plus the `default` route from LLM_* variables
    (the offline scripted model when no LLM_BASE_URL is set)."""
    timeout = settings.runtime.request_timeout_seconds
    retries = settings.runtime.max_retries
    entries: dict[str, ProfileEntry] = {}
    for name, profile in settings.providers.items():
        key = os.environ.get(profile.api_key_env) if profile.api_key_env else None
        entries[name] = ProfileEntry(
            provider=build_provider(profile, key, timeout=timeout, max_retries=retries),
            capacity=ProfileCapacity(
                name=name, model=profile.model, context_window=profile.context_window
            ),
            prices=Prices(
                input_per_mtok=profile.price_input_per_mtok,
                cached_input_per_mtok=profile.price_cached_input_per_mtok,
                output_per_mtok=profile.price_output_per_mtok,
                cache_write_per_mtok=profile.price_cache_write_per_mtok,
                cache_write_1h_per_mtok=profile.price_cache_write_1h_per_mtok,
            ),
            count_tokens=_token_counter(
                f"providers.{name}.tokenizer_file",
                profile.tokenizer_file,
                profile.tokenizer_pattern,
            ),
            wire=kind_for(profile.base_url, profile.kind),
            vision=profile.vision,
        )
    default_provider: LLMProvider
    if offline is not None:
        default_provider = offline
    elif settings.llm_base_url:
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
        default_provider = build_provider(
            ProviderProfile(
                base_url=settings.llm_base_url,
                kind=settings.llm_kind,
                cache=settings.llm_cache,
                cache_ttl=settings.llm_cache_ttl,
                model=settings.llm_model,
                reasoning=settings.llm_reasoning,
            ),
            key,
            timeout=timeout,
            max_retries=retries,
        )
    else:
        default_provider = ScriptedModel.demo()
    entries.setdefault(
        "default",
        ProfileEntry(
            provider=default_provider,
            capacity=ProfileCapacity(
                name="default", model=settings.llm_model, context_window=settings.llm_context_window
            ),
            count_tokens=_token_counter(
                "llm_tokenizer_file", settings.llm_tokenizer_file, settings.llm_tokenizer_pattern
            ),
            wire=kind_for(settings.llm_base_url or "", settings.llm_kind),
            vision=settings.llm_vision,
        ),
    )
    default_name = settings.default_provider or "default"
    if default_name not in entries:
        raise ConfigError("default_provider", f"no provider profile named {default_name!r}")
    default_model = entries[default_name].capacity.model or settings.llm_model
    table = RouteTable(
        entries,
        default_profile=default_name,
        default_model=default_model,
        fallback_window=settings.llm_context_window,
    )
    table.chains = fallback_chains(settings, table)
    return table


def fallback_chains(settings: Settings, table: RouteTable) -> FallbackChains | None:
    """The profiles' `fallbacks` (None when no profile has any); a chain naming an unknown
    profile, or its own, is a `ConfigError`."""
    chains = {name: p.fallbacks for name, p in settings.providers.items() if p.fallbacks}
    if not chains:
        return None
    for name, chain in chains.items():
        for fallback in chain:
            if fallback == name or fallback not in table.profile_names:
                what = "itself" if fallback == name else f"no provider profile named {fallback!r}"
                raise ConfigError(f"providers.{name}.fallbacks", f"{fallback!r}: {what}")
    cooldowns = {n: p.fallback_cooldown_seconds for n, p in settings.providers.items()}
    return FallbackChains(resolve=table.resolve, chains=chains, cooldowns=cooldowns)


def _token_counter(
    setting: str, path: Path | None, pattern: str | None
) -> Callable[[str], int] | None:
    """The exact tokenizer an operator configured (read once, offline), or None."""
    if path is None:
        return None
    try:
        return load_token_counter(path, pattern=pattern).count
    except TokenizerUnavailable as exc:
        raise ConfigError(setting, str(exc)) from None

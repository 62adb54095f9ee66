"""`tgbot init`'s answers as flags: the provider presets, the options and their parsing."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bot.errors import ConfigError

ProviderName = Literal[
    "deepseek", "anthropic", "openai", "openrouter", "ollama", "openai-compatible"
]
PROVIDER_NAMES: tuple[ProviderName, ...] = (
    "deepseek",
    "anthropic",
    "openai",
    "openrouter",
    "ollama",
    "openai-compatible",
)
LOCALES = ("auto", "zh", "en")
MODEL_TIMEOUT_SECONDS = 30.0
START_WAIT_SECONDS = 20


@dataclass(frozen=True, slots=True)
class Preset:
    label: str
    base_url: str
    model: str
    api_key_env: str | None
    context_window: int = 0
    kind: Literal["openai", "anthropic"] = "openai"


PRESETS: dict[ProviderName, Preset] = {
    # DeepSeek retired `deepseek-chat` on 2026-07-24; V4 Flash has a 1M-token window
    "deepseek": Preset(
        "DeepSeek", "https://api.deepseek.com/v1", "deepseek-v4-flash", "DEEPSEEK_API_KEY",
        1_048_576,
    ),
    "anthropic": Preset(
        "Anthropic", "https://api.anthropic.com", "claude-sonnet-4-5", "ANTHROPIC_API_KEY",
        200_000, "anthropic",
    ),
    "openai": Preset(
        "OpenAI", "https://api.openai.com/v1", "gpt-4o-mini", "OPENAI_API_KEY", 128_000
    ),
    "openrouter": Preset(
        "OpenRouter", "https://openrouter.ai/api/v1", "deepseek/deepseek-v4-flash",
        "OPENROUTER_API_KEY", 1_048_576,
    ),
    # Ollama drops what exceeds num_ctx silently; its default is 2,048-8,192 tokens
    "ollama": Preset("Ollama (local)", "http://127.0.0.1:11434/v1", "qwen3:8b", None, 8_192),
    "openai-compatible": Preset("another OpenAI-compatible endpoint", "", "", "LLM_API_KEY"),
}  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class InitOptions:
    """The answers given as flags (None: ask, or keep what the files say)."""

    interactive: bool
    token: str | None = None
    provider: ProviderName | None = None
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    owner_id: int | None = None
    allow_chats: tuple[int, ...] | None = None
    timezone: str | None = None
    locale: str | None = None
    config: Path = Path("bot.toml")
    env_file: Path = Path(".env")


def parse_options(args: Any, fallback_config: str | None) -> InitOptions:
    """The `argparse` namespace of `tgbot init` as options (`--config` of `init` wins over
    `tgbot --config`)."""
    config = args.init_config or fallback_config or "bot.toml"
    interactive = not args.non_interactive
    if interactive and not sys.stdin.isatty():
        raise ConfigError(
            "tgbot init", "stdin is not a terminal: pass --non-interactive and the flags"
        )
    return InitOptions(
        interactive=interactive,
        token=args.token,
        provider=args.provider,
        base_url=args.base_url,
        model=args.model,
        api_key_env=args.api_key_env,
        owner_id=args.owner_id,
        allow_chats=tuple(args.allow_chat) if args.allow_chat is not None else None,
        timezone=args.timezone,
        locale=args.locale,
        config=Path(config),
        env_file=Path(args.env_file),
    )


def add_arguments(parser: Any) -> None:
    """The flags of `tgbot init` (DESIGN §7 names them)."""
    parser.add_argument(
        "--non-interactive", action="store_true", help="ask nothing: flags, env and files"
    )
    parser.add_argument("--token", help="the bot's token from @BotFather (or BOT_TOKEN)")
    parser.add_argument("--provider", choices=PROVIDER_NAMES, help="the model provider")
    parser.add_argument("--base-url", help="the provider's endpoint (default: its own)")
    parser.add_argument("--model", help="the model name (default: the provider's default)")
    parser.add_argument(
        "--api-key-env",
        metavar="NAME",
        help="the environment variable holding the key (read now, stored in the env file)",
    )
    parser.add_argument("--owner-id", type=int, metavar="ID", help="the owner's user id")
    parser.add_argument(
        "--allow-chat",
        type=int,
        action="append",
        metavar="ID",
        help="allow this chat (repeat for more; given at all, it replaces the allow-list)",
    )
    parser.add_argument("--timezone", metavar="ZONE", help="IANA time zone, e.g. Asia/Shanghai")
    parser.add_argument("--locale", choices=LOCALES, help="auto (default), zh or en")
    parser.add_argument(
        "--config", dest="init_config", metavar="PATH", help="the TOML file (default bot.toml)"
    )
    parser.add_argument(
        "--env-file", default=".env", metavar="PATH", help="the secrets file (default .env)"
    )

"""`tgbot doctor`: one line per check, ✔ or ✘ — settings, the database at head, DATA_DIR
writable, the token (getMe), privacy mode, the owner (set, and reachable: getChat, which
sends nothing), the webhook or polling state, every model route (one tiny request each, or
the reason none was sent: an unset key variable, a forgotten `LLM_MODEL`), prices, the
locale and the dashboard port. Each ✘ line ends with the fix.

It creates nothing: the database is only read (a SQLite file that does not exist is
reported, not made) and DATA_DIR is only written to by a temporary file it removes. The exit
code is 1 when any check fails, 2 when the settings themselves do not load.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO
from urllib.parse import urlsplit

from bot.app.doctor_jobs import job_chat_checks
from bot.app.preflight import (
    check_bot_token,
    check_data_dir,
    check_database_url,
    describe_database_failure,
    mask_url,
    sqlite_file,
)
from bot.app.private_chats import private_chats_said
from bot.app.probes import PRIVACY_FIX, one_model_call
from bot.config import ProviderProfile, Settings, load_settings
from bot.errors import BotError, ConfigError

if TYPE_CHECKING:
    from adapters.telegram.probe import BotIdentity, TelegramProbe

MODEL_TIMEOUT_SECONDS = 20.0
OK = "✔"
FAILED = "✘"
WARNING = "⚠"


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    passed: bool
    detail: str
    warning: bool = False
    """Passed, but worth changing (the exit code stays 0)."""

    def line(self) -> str:
        mark = (WARNING if self.warning else OK) if self.passed else FAILED
        return f"{mark} {self.name}: {self.detail}"


async def doctor(config: str | None, *, out: TextIO | None = None) -> int:
    write = (out or sys.stdout).write
    try:
        settings = load_settings(config)
    except ConfigError as exc:
        write(Check("settings", False, str(exc)).line() + "\n")
        return 2
    write(Check("settings", True, _settings_source(config)).line() + "\n")
    checks: tuple[tuple[str, Callable[[Settings], Awaitable[str | list[Check]]]], ...] = (
        ("database", _database),
        ("DATA_DIR", _data_dir),
        ("Telegram", _telegram),
        ("chats", _access),
        ("model", _models),
        ("images", _vision),
        ("prices", _prices),
        ("locale", _locale),
        ("dashboard", _dashboard_port),
        ("chats", _chats),
    )
    failed = 0
    for name, run in checks:
        for check in await _attempt(name, run, settings):
            failed += not check.passed
            write(check.line() + "\n")
    if settings.mcp.servers:  # one line per MCP server, ✔ with its tools or ✘ with why
        from bot.app.mcp_commands import inspect_servers

        try:
            reports, _ = await inspect_servers(settings)
        except Exception as exc:
            write(Check("mcp", False, f"{type(exc).__name__}: {exc}").line() + "\n")
            return 1
        for report in reports:
            failed += not report.up
            write(report.line() + "\n")
    return 1 if failed else 0


def _settings_source(config: str | None) -> str:
    """Where the settings came from: the file by its absolute path, and how it was named."""
    if config:
        return f"read from the environment and {os.path.abspath(config)} (--config)"
    if named := os.environ.get("BOT_CONFIG"):
        return f"read from the environment and {os.path.abspath(named)} (BOT_CONFIG)"
    return "read from the environment only (no settings file: --config or BOT_CONFIG)"


async def _attempt(
    name: str, run: Callable[[Settings], Awaitable[str | list[Check]]], settings: Settings
) -> list[Check]:
    try:
        result = await run(settings)
    except BotError as exc:
        return [Check(name, False, str(exc))]
    except Exception as exc:  # a check reports, it never crashes the report
        return [Check(name, False, _first_line(exc))]
    return [Check(name, True, result)] if isinstance(result, str) else result


def _first_line(exc: BaseException) -> str:
    text = (str(exc).strip() or type(exc).__name__).splitlines()[0]
    return text if isinstance(exc, BotError) else f"{type(exc).__name__}: {text}"


async def _database(settings: Settings) -> str:
    from storage.schema import HEAD_REVISION, schema_revision

    url = check_database_url(settings)
    masked = mask_url(url)
    database = sqlite_file(url)
    if database is not None and not database.is_file():
        _creatable(database.parent, "DATABASE_URL")
        return f"no database yet at {database}: `tgbot run` creates it and its schema at start"
    try:
        revision = await schema_revision(url)
    except Exception as exc:
        line = describe_database_failure(exc, url)
        if line is None:
            raise
        raise ConfigError("DATABASE_URL", line) from None
    if revision is not None and revision > HEAD_REVISION:
        raise ConfigError(
            "DATABASE_URL",
            f"{masked} is at revision {revision}, newer than this code's {HEAD_REVISION}: "
            "run the release that wrote it, or a newer one",
        )
    if revision != HEAD_REVISION:
        return (
            f"{masked} reachable, schema at revision {revision or 'none (empty)'}: `tgbot run` "
            f"upgrades it to {HEAD_REVISION} at start (or `tgbot db upgrade` now)"
        )
    return f"{masked} reachable, schema at head ({HEAD_REVISION})"


def _creatable(path: Path, setting: str) -> None:
    """`path` exists as a directory, or its nearest existing parent lets this user make it."""
    existing = next(parent for parent in (path, *path.parents) if parent.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(setting, f"{path} does not exist and {existing} is not writable")


async def _chats(settings: Settings) -> list[Check]:
    """`[chats]`: every table checked (docs/groups.md); a chat never seen is a warning."""
    from bot.app.chat_scopes import chat_problems
    from bot.app.wiring import offered_tools
    from storage.engine import create_engine_for
    from storage.schema import schema_at_head
    from storage.sql import SqlStore

    if not settings.chats.by_id and not settings.triggers.patterns:
        return []  # nothing to check: no line
    seen: set[int] | None = None  # unknown: the database line says why
    url = settings.resolved_database_url
    database = sqlite_file(url)
    try:  # read-only: a missing or old database is not created or migrated here
        if (database is None or database.is_file()) and await schema_at_head(url):
            store = SqlStore(create_engine_for(url))
            try:
                seen = {session.key.chat_id for session in await store.list_sessions()}
            finally:
                await store.close()
    except (BotError, OSError):
        seen = None
    names = {tool.spec.name for tool in offered_tools(settings)}
    problems = chat_problems(settings, names, seen)
    if not problems:
        count = len(settings.chats.by_id)
        return [Check("chats", True, f"{count} chat table{'s' * (count != 1)} valid")]
    return [Check("chats", line.startswith("⚠"), line[2:]) for line in problems]


async def _data_dir(settings: Settings) -> str:
    if not settings.data_dir.exists():
        _creatable(settings.data_dir, "DATA_DIR")
        return f"{settings.data_dir} does not exist yet: `tgbot run` creates it"
    check_data_dir(settings.data_dir, create=False)
    return f"{settings.data_dir} is writable"


async def _telegram(settings: Settings) -> list[Check]:
    """getMe, then privacy mode, the owner and the webhook, one line each."""
    from adapters.telegram.probe import TelegramProbe

    token = check_bot_token(settings, "run")
    base = settings.telegram_api_base
    async with TelegramProbe(token, base) as probe:
        try:
            me = await probe.identify()
        except BotError:
            raise
        except Exception as exc:
            raise ConfigError("getMe", _unreadable(exc, base)) from None
        checks = [Check("Telegram", True, f"getMe answered @{me.username} (id {me.id}) at {base}")]
        if me.reads_all_group_messages:
            checks.append(Check("privacy mode", True, "off: the bot reads every group message"))
        else:
            checks.append(
                Check(
                    "privacy mode",
                    False,
                    "on: in groups the bot sees only commands, mentions and replies to it; "
                    "fix: " + PRIVACY_FIX.format(username=me.username),
                )
            )
        checks.append(await _method("OWNER_ID", "getChat", base, _owner(settings, probe, me)))
        checks.append(await _method("webhook", "getWebhookInfo", base, _webhook(settings, probe)))
        checks.extend(
            Check("jobs", ok, line) for ok, line in await job_chat_checks(settings, probe)
        )
    return checks


async def _method(name: str, method: str, base: str, check: Awaitable[Check]) -> Check:
    """One Telegram line; a call whose answer could not be read is that line's ✘, naming the
    Bot API method, and the other lines still run."""
    try:
        return await check
    except Exception as exc:
        return Check(name, False, f"{method}: {_unreadable(exc, base)}")


def _unreadable(exc: BaseException, base: str) -> str:
    return (
        f"could not read the answer of {base} ({_first_line(exc)}); fix: check "
        "TELEGRAM_API_BASE points at a Bot API server"
    )


async def _owner(settings: Settings, probe: TelegramProbe, me: BotIdentity) -> Check:
    username = me.username
    owner = settings.owner_id
    if owner is None:
        return Check(
            "OWNER_ID",
            False,
            "unset: owner commands (/usage, /context, /model) and the daily summary are off; "
            f"fix: send /id to @{username} and set OWNER_ID (or run `tgbot init`)",
        )
    name = await probe.chat_name(owner)
    if name is None:
        return Check(
            "OWNER_ID",
            False,
            f"{owner}: the bot cannot message this user (never sent it /start, or blocked "
            f"it); fix: send /start to @{username} from that account",
        )
    return Check("OWNER_ID", True, f"{owner} ({name}): the bot can message them")


async def _webhook(settings: Settings, probe: TelegramProbe) -> Check:
    state = await probe.webhook()
    waiting = f"{state.pending_updates} update(s) waiting"
    if not state.url:
        return Check("webhook", True, f"none: long polling (`tgbot run`); {waiting}")
    if settings.webhook_url != state.url:
        return Check(
            "webhook",
            False,
            f"set to {state.url}, so `tgbot run` (long polling) gets 409 Conflict; fix: set "
            "WEBHOOK_URL to it and run `tgbot run --webhook`, or delete it "
            "(https://api.telegram.org/bot<token>/deleteWebhook)",
        )
    if state.last_error:
        return Check(
            "webhook",
            False,
            f"set to {state.url}; Telegram's last delivery failed: {state.last_error}; fix: "
            "make that URL answer over HTTPS (`tgbot run --webhook` behind it)",
        )
    return Check("webhook", True, f"set to {state.url} (`tgbot run --webhook`); {waiting}")


async def _access(settings: Settings) -> list[Check]:
    """Who the bot answers: the allow-list of groups, then the private-chat policy."""
    security = settings.security
    allowed = security.allowed_chats
    if allowed:
        shown = ", ".join(map(str, allowed[:5])) + (" …" if len(allowed) > 5 else "")
        groups = Check(
            "allowed_chats",
            True,
            f"{len(allowed)} chat(s) ({shown}): the bot answers and stores only there and "
            "leaves any other group it is added to",
        )
    else:
        groups = Check(
            "allowed_chats",
            True,
            "empty: the bot answers in every group anyone adds it to, at your cost; fix: "
            "[security] allowed_chats = [<group ids>] (`tgbot init` lists them)",
            warning=True,
        )
    return [groups, Check("private_chats", True, _private_policy(settings))]


def _private_policy(settings: Settings) -> str:
    return private_chats_said(settings)


_KEY_VARIABLES = (
    "OPENAI_API_KEY",
    "DEEPSEEK_API_KEY",
    "ANTHROPIC_API_KEY",
    "OPENROUTER_API_KEY",
    "DASHSCOPE_API_KEY",
    "MOONSHOT_API_KEY",
    "GEMINI_API_KEY",
    "XAI_API_KEY",
)
"""Variables people set for a provider's own SDK, mistaken for `LLM_API_KEY`."""


async def _models(settings: Settings) -> list[Check]:
    """Every route, one line each: the profiles of the TOML, then the `default` route from
    the LLM_* variables."""
    if settings.default_provider and settings.default_provider not in settings.providers:
        raise ConfigError(
            "default_provider",
            f"no provider profile named {settings.default_provider!r}; fix: add "
            f"[providers.{settings.default_provider}] or change default_provider",
        )
    checks: list[Check] = []
    for name, profile in settings.providers.items():
        checks.append(await _profile(settings, name, profile))
        if profile.context_window <= 0:
            checks.append(_unknown_window(name, f"context_window = <tokens> in [providers.{name}]"))
    default_name = "model default"
    if settings.llm_base_url:
        checks.append(await _env_route(settings, default_name, settings.llm_base_url))
        if settings.llm_context_window <= 0:
            checks.append(_unknown_window("default", "export LLM_CONTEXT_WINDOW=<tokens>"))
    elif not settings.default_provider:
        checks.append(
            Check(
                default_name,
                True,
                "LLM_BASE_URL unset: the offline model, replies are canned (`tgbot run --offline`)",
            )
        )
    return checks + _chains(settings, checks)


def _chains(settings: Settings, checks: list[Check]) -> list[Check]:
    """One line per fallback chain: every route of it was checked above (a profile each);
    the chain passes when every fallback exists, is not the profile itself, and answered."""
    answered = {c.name.removeprefix("model "): c.passed for c in checks}
    lines: list[Check] = []
    for name, profile in settings.providers.items():
        if not profile.fallbacks:
            continue
        problems: list[str] = []
        for fallback in profile.fallbacks:
            if fallback == name:
                problems.append(f"{fallback} is the profile itself")
            elif fallback not in answered:
                problems.append(f"no provider profile named {fallback!r}")
            elif not answered[fallback]:
                problems.append(f"{fallback} did not pass its check (its line above)")
        chain = " → ".join([name, *profile.fallbacks])
        cooldown = f"{profile.fallback_cooldown_seconds:g} s cooldown"
        if problems:
            detail = f"{chain}: {'; '.join(problems)}; fix: providers.{name}.fallbacks"
            lines.append(Check(f"fallbacks {name}", False, detail))
        else:
            lines.append(
                Check(f"fallbacks {name}", True, f"{chain}, every route answered ({cooldown})")
            )
    return lines


def _unknown_window(route: str, fix: str) -> Check:
    from bot.context.window import UNKNOWN_WINDOW_TOKENS

    return Check(
        f"context window {route}",
        True,
        f"unknown: the bot assumes {UNKNOWN_WINDOW_TOKENS:,} tokens (history may be cut "
        f"early, or a request refused as too long); fix: {fix} (the model's documented window)",
        warning=True,
    )


async def _profile(settings: Settings, name: str, profile: ProviderProfile) -> Check:
    title = f"model {name}"
    where = f"providers.{name}"
    if not profile.model:
        return Check(title, False, f'{where}.model: unset; fix: model = "<model name>"')
    key_env = profile.api_key_env
    key = os.environ.get(key_env) if key_env else None
    if key_env and not key:
        return Check(
            title,
            False,
            f"{profile.model} at {profile.base_url}: {key_env} ({where}.api_key_env) is not "
            f"set; fix: export {key_env}=… (or put it in the .env file)",
        )
    key_hint = f"the key in {key_env}" if key_env else f"api_key_env in [{where}]"
    return await _call(settings, title, profile, key, key_hint)


async def _env_route(settings: Settings, title: str, base_url: str) -> Check:
    if settings.llm_model == "offline-demo" and "LLM_MODEL" not in os.environ:
        return Check(
            title,
            False,
            f"LLM_MODEL: unset, so the bot would send the model name `offline-demo` to "
            f"{base_url}; fix: export LLM_MODEL=<model name>",
        )
    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
    if key is None and not _loopback(base_url):
        stray = next((name for name in _KEY_VARIABLES if os.environ.get(name)), None)
        if stray is not None:
            return Check(
                title,
                False,
                f"LLM_API_KEY: unset, but {stray} is set (the bot reads only LLM_API_KEY for "
                f'{base_url}); fix: export LLM_API_KEY="${stray}"',
            )
    profile = ProviderProfile(
        base_url=base_url,
        kind=settings.llm_kind,
        cache=settings.llm_cache,
        cache_ttl=settings.llm_cache_ttl,
        model=settings.llm_model,
    )
    return await _call(settings, title, profile, key, "LLM_API_KEY")


async def _call(
    settings: Settings, title: str, profile: ProviderProfile, key: str | None, key_hint: str
) -> Check:
    from bot.app.model_routes import build_provider

    provider = build_provider(profile, key, timeout=MODEL_TIMEOUT_SECONDS, max_retries=0)
    where = f"{profile.model} at {profile.base_url}"
    try:
        usage = await one_model_call(provider, profile.model)
    except Exception as exc:
        line = _first_line(exc)
        if "HTTP 401" in line or "HTTP 403" in line:
            fix = f"check {key_hint}"
        elif "HTTP 404" in line or "model" in line.lower():
            fix = "check the model name and the base URL"
        else:
            fix = "check the base URL and that the endpoint is up"
        return Check(title, False, f"{where}: {line}; fix: {fix}")
    finally:
        await provider.aclose()
    if usage is None:
        return Check(title, True, f"{where} answered; it reported no usage")
    return Check(
        title,
        True,
        f"{where} answered: input {usage.input_tokens}, output {usage.output_tokens}, "
        f"cache reads {usage.cached_tokens}, cache writes {usage.cache_write_tokens} tokens",
    )


def _loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    return host in ("localhost", "::1") or host.startswith("127.")


async def _prices(settings: Settings) -> str:
    priced = [
        name
        for name, p in settings.providers.items()
        if p.price_input_per_mtok or p.price_output_per_mtok or p.price_cached_input_per_mtok
    ]
    unpriced = [name for name in settings.providers if name not in priced]
    if settings.llm_base_url:
        unpriced.append("default (LLM_* variables carry no prices)")
    parts = []
    if priced:
        parts.append(f"set for {', '.join(priced)} ({settings.ledger.currency})")
    if unpriced:
        parts.append(
            f"not set for {', '.join(unpriced)}: costs show 'no prices configured' "
            "(price_*_per_mtok in a [providers.NAME] profile)"
        )
    return "; ".join(parts) or "no model route to price (the offline model costs nothing)"


async def _locale(settings: Settings) -> str:
    locale = settings.bot_locale
    if locale == "auto":
        return "auto: each member's own language (zh or en); groups follow their recent members"
    return f"{locale} for everyone (BOT_LOCALE; `auto` follows each member's language)"


async def _vision(settings: Settings) -> str:
    """Which routes see images (a profile's `vision`, `LLM_VISION` for `default`)."""
    seeing = {name: profile.vision for name, profile in settings.providers.items()}
    seeing.setdefault("default", settings.llm_vision)
    on = sorted(name for name, sees in seeing.items() if sees)
    off = sorted(name for name, sees in seeing.items() if not sees)
    parts = []
    if on:
        parts.append(f"vision on for {', '.join(on)}: photos go to the model")
    if off:
        parts.append(
            f"vision off for {', '.join(off)}: no image is sent, the model is told it cannot "
            "see it (`vision = true` in the profile, or LLM_VISION=true)"
        )
    return "; ".join(parts)


async def _dashboard_port(settings: Settings) -> str:
    port = settings.dashboard_port
    if port is None:
        return "off (DASHBOARD_PORT unset; `tgbot dashboard` defaults to 127.0.0.1:8080)"
    host = "0.0.0.0" if settings.dashboard_token is not None else "127.0.0.1"
    with socket.socket() as probe:
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise ConfigError(
                "DASHBOARD_PORT", f"cannot listen on {host}:{port}: {exc.strerror}"
            ) from None
    return f"{host}:{port} is free"

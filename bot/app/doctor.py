"""`tgbot doctor`: one line per check, ✔ or ✘ — settings, the database at head, DATA_DIR
writable, the token (getMe), the model endpoint (one tiny request) and the dashboard port.

It creates nothing: the database is only read (a SQLite file that does not exist is
reported, not made) and DATA_DIR is only written to by a temporary file it removes. The exit
code is 1 when any check fails, 2 when the settings themselves do not load.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TextIO

from bot.app.preflight import (
    check_bot_token,
    check_data_dir,
    check_database_url,
    describe_database_failure,
    describe_telegram_failure,
    mask_url,
    sqlite_file,
)
from bot.config import Settings, load_settings
from bot.errors import BotError, ConfigError

MODEL_TIMEOUT_SECONDS = 20.0
OK = "✔"
FAILED = "✘"


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    passed: bool
    detail: str

    def line(self) -> str:
        return f"{OK if self.passed else FAILED} {self.name}: {self.detail}"


async def doctor(config: str | None, *, out: TextIO | None = None) -> int:
    write = (out or sys.stdout).write
    try:
        settings = load_settings(config)
    except ConfigError as exc:
        write(Check("settings", False, str(exc)).line() + "\n")
        return 2
    source = f"environment and {config}" if config else "environment"
    write(Check("settings", True, f"read from the {source}").line() + "\n")
    checks: tuple[tuple[str, Callable[[Settings], Awaitable[str]]], ...] = (
        ("database", _database),
        ("DATA_DIR", _data_dir),
        ("Telegram", _token),
        ("model", _model),
        ("images", _vision),
        ("dashboard", _dashboard_port),
    )
    failed = 0
    for name, run in checks:
        check = await _attempt(name, run, settings)
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


async def _attempt(
    name: str, run: Callable[[Settings], Awaitable[str]], settings: Settings
) -> Check:
    try:
        return Check(name, True, await run(settings))
    except BotError as exc:
        return Check(name, False, str(exc))
    except Exception as exc:  # a check reports, it never crashes the report
        text = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        return Check(name, False, f"{type(exc).__name__}: {text}")


async def _database(settings: Settings) -> str:
    from storage.schema import HEAD_REVISION, schema_revision

    url = check_database_url(settings)
    masked = mask_url(url)
    database = sqlite_file(url)
    if database is not None and not database.is_file():
        raise ConfigError("DATABASE_URL", f"no database at {database}: run `tgbot db upgrade`")
    try:
        revision = await schema_revision(url)
    except Exception as exc:
        line = describe_database_failure(exc, url)
        if line is None:
            raise
        raise ConfigError("DATABASE_URL", line) from None
    if revision != HEAD_REVISION:
        raise ConfigError(
            "DATABASE_URL",
            f"{masked} is at revision {revision or 'none (empty)'}, head is {HEAD_REVISION}: "
            "run `tgbot db upgrade`",
        )
    return f"{masked} reachable, schema at head ({HEAD_REVISION})"


async def _data_dir(settings: Settings) -> str:
    check_data_dir(settings.data_dir, create=False)
    return f"{settings.data_dir} is writable"


async def _token(settings: Settings) -> str:
    from adapters.telegram.app import build_bot

    token = check_bot_token(settings, "run")
    try:
        bot = build_bot(token, settings.telegram_api_base)
    except Exception as exc:
        raise describe_telegram_failure(exc, settings.telegram_api_base) or exc from None
    try:
        me = await bot.get_me()
    except Exception as exc:
        raise describe_telegram_failure(exc, settings.telegram_api_base) or exc from None
    finally:
        await bot.session.close()
    return f"getMe answered @{me.username} (id {me.id}) at {settings.telegram_api_base}"


async def _model(settings: Settings) -> str:
    from bot.app.wiring import build_routes
    from bot.domain.messages import ChatMessage
    from bot.ports import LLMRequest

    if not settings.llm_base_url and not settings.default_provider:
        return "LLM_BASE_URL unset: the offline model, replies are canned (`tgbot run --offline`)"
    # one request, no retries (a doctor reports the first failure) and a short deadline
    quick = settings.runtime.model_copy(
        update={"max_retries": 0, "request_timeout_seconds": MODEL_TIMEOUT_SECONDS}
    )
    routes = build_routes(settings.model_copy(update={"runtime": quick}))
    try:
        route = routes.resolve(None)
        response = await route.provider.complete(
            LLMRequest(
                model=route.model,
                messages=(ChatMessage(role="user", content="Reply with the word: ok"),),
                max_output_tokens=1,
            )
        )
    finally:
        await routes.aclose()
    usage = response.usage
    if usage is None:
        return f"{route.profile}:{route.model} answered; it reported no usage"
    return (
        f"{route.profile}:{route.model} answered: input {usage.input_tokens}, "
        f"output {usage.output_tokens}, cache reads {usage.cached_tokens}, "
        f"cache writes {usage.cache_write_tokens} tokens"
    )


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

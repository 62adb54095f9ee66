"""Start-up checks that turn every operator mistake into one line naming the setting or the
resource (`ConfigError`, exit code 2), before anything heavy is imported or opened.

Only the standard library is imported at module level: `tgbot run` without `BOT_TOKEN`
must say so in well under a second, before aiogram (~3.5 s to import on 2 cores) is loaded.
The database and Bot API translations import their libraries' exception types when they run.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from bot.errors import ConfigError

if TYPE_CHECKING:
    from bot.config import Settings

_SCHEME = re.compile(r"\A([A-Za-z][A-Za-z0-9+.-]*)://")  # anchored: linear under search too
_PASSWORD = re.compile(r"(://[^/:@]*:)[^/@]*@")
_TOKEN = re.compile(r"\A[0-9]+:[A-Za-z0-9_-]+")  # anchored: linear under search too
SUPPORTED_DATABASES = ("sqlite", "postgresql", "postgres")
_DRIVERS = {"sqlite": ("", "aiosqlite"), "postgresql": ("", "asyncpg"), "postgres": ("",)}


def mask_url(url: str) -> str:
    """The URL with its password replaced by `***` (`postgresql://bot:***@db/tgbot`)."""
    return _PASSWORD.sub(r"\1***@", url)


def check_database_url(settings: Settings) -> str:
    """The database URL, refused in one line when it is not one we can open."""
    url = settings.resolved_database_url
    usage = "use sqlite+aiosqlite:///PATH or postgresql+asyncpg://USER:PASSWORD@HOST/DB"
    found = _SCHEME.match(url)
    if found is None:
        raise ConfigError("DATABASE_URL", f"cannot parse {mask_url(url)!r} ({usage})")
    backend, _, driver = found[1].lower().partition("+")
    if backend not in SUPPORTED_DATABASES or driver not in _DRIVERS[backend]:
        raise ConfigError(
            "DATABASE_URL", f"unsupported database {found[1]!r} in {mask_url(url)} ({usage})"
        )
    return url


def check_bot_token(settings: Settings, command: str) -> str:
    """`BOT_TOKEN` present and shaped as @BotFather gives it (`123456:ABC…`)."""
    if settings.bot_token is None:
        raise ConfigError("BOT_TOKEN", f"required for `tgbot {command}` (use `tgbot demo` offline)")
    token = settings.bot_token.get_secret_value()
    if not _TOKEN.fullmatch(token):
        raise ConfigError(
            "BOT_TOKEN",
            f"malformed ({len(token)} characters): expected <bot id>:<secret> as @BotFather "
            "gives it, e.g. 123456:ABC-DEF1234ghIkl",
        )
    return token


def check_data_dir(path: Path, *, create: bool) -> None:
    """DATA_DIR exists (created when `create`) and a file can be written in it."""
    try:
        if create:
            path.mkdir(parents=True, exist_ok=True)
        elif not path.is_dir():
            raise ConfigError("DATA_DIR", f"{path} does not exist")
        with tempfile.NamedTemporaryFile(dir=path, prefix=".tgbot-write-check-"):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigError("DATA_DIR", f"{path} is not writable: {reason}") from None


def check_offline(settings: Settings, *, offline: bool) -> None:
    """`tgbot run` in front of real users needs a model, or `--offline` said out loud."""
    if offline or settings.llm_base_url or settings.default_provider:
        return
    raise ConfigError(
        "LLM_BASE_URL",
        "unset, so every reply would be the offline model's canned text; set LLM_BASE_URL "
        "(and LLM_API_KEY, LLM_MODEL) or default_provider, or pass --offline to run it anyway",
    )


def describe_database_failure(exc: BaseException, url: str) -> str | None:
    """One line for a database that could not be opened, None for anything else."""
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError

    masked = mask_url(url)
    if isinstance(exc, NoSuchModuleError | ArgumentError):
        return f"cannot use {masked}: {exc}".splitlines()[0]
    if isinstance(exc, SQLAlchemyError):
        origin = getattr(exc, "orig", None) or exc.__cause__ or exc
        return f"cannot open {masked}: {_first_line(origin)}"
    if isinstance(exc, OSError):
        return f"cannot connect to {masked}: {exc.strerror or _first_line(exc)}"
    if type(exc).__module__.startswith("asyncpg"):
        return f"{masked} refused: {_first_line(exc)}"
    return None


@asynccontextmanager
async def opening_database(url: str) -> AsyncIterator[None]:
    """Translate a database that refuses at start-up into one `DATABASE_URL` line."""
    try:
        yield
    except ConfigError:
        raise
    except Exception as exc:
        line = describe_database_failure(exc, url)
        if line is None:
            raise
        raise ConfigError("DATABASE_URL", line) from None


def describe_telegram_failure(exc: BaseException, api_base: str) -> ConfigError | None:
    """One line for a Bot API that refused the token or could not be reached."""
    from adapters.telegram.startup_errors import startup_failure

    return startup_failure(exc, api_base)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def invoked_as() -> str:
    """How this `tgbot` was invoked (e.g. `.venv/bin/tgbot`), for copy-paste hints."""
    import sys

    invoked = Path(sys.argv[0])
    return str(invoked) if invoked.name == "tgbot" else "tgbot"


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL (None for another database or an in-memory one)."""
    found = _SCHEME.match(url)
    if found is None or not found[1].lower().startswith("sqlite"):
        return None
    rest = url[found.end() :]
    if not rest.startswith("/"):
        return None
    database = rest[1:].split("?", 1)[0]
    if database in ("", ":memory:") or database.startswith("file:"):
        return None
    return Path(os.path.expanduser(database))


STAND_IN_OWNER = 1
"""The owner's user id in `tgbot chat --fresh` without OWNER_ID (no Telegram account has it)."""


def check_chat_owner(settings: Settings, *, fresh: bool) -> int:
    """Whom `tgbot chat` talks as: OWNER_ID, or with `--fresh` (a throw-away database) a
    stand-in; without either a clear error, before anything is created."""
    if settings.owner_id is not None:
        return settings.owner_id
    if fresh:
        return STAND_IN_OWNER
    raise ConfigError(
        "OWNER_ID",
        "unset: `tgbot chat` talks as the owner in the owner's private chat; set OWNER_ID "
        "(your Telegram user id; `tgbot init` finds it), or pass --fresh to talk as a "
        f"stand-in owner (user {STAND_IN_OWNER}) in a throw-away database",
    )

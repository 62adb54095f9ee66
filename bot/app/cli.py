"""The `tgbot` command line: parses the arguments, checks the settings, then runs the
command's module.

Argument parsing and settings validation import nothing heavy (argparse, pydantic,
`bot.app.preflight`): a missing `BOT_TOKEN` is reported in ~0.3 s, where importing aiogram
first took 3.7 s (2 shared cores, warm disk cache). Each handler imports its command's module
when it runs (the one kind of function-local import in the package, and it stays inside
`bot/app`): wiring everything at import time measured 3.4-3.7 s for `tgbot --help`.
Every start-up failure is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from bot.errors import BotError, ConfigError, NotBuiltError

if TYPE_CHECKING:
    from bot.config import Settings

_COMMON_ENV = "BOT_CONFIG, BOT_TIMEZONE, BOT_LOCALE"
_DB_ENV = "DATA_DIR, DATABASE_URL"
_MODEL_ENV = "LLM_BASE_URL, LLM_API_KEY, LLM_MODEL, LLM_CONTEXT_WINDOW"
_ENV = {
    "run": f"BOT_TOKEN, TELEGRAM_API_BASE, OWNER_ID, {_MODEL_ENV}, {_DB_ENV}, "
    f"WEBHOOK_URL, WEBHOOK_SECRET, DASHBOARD_PORT, DASHBOARD_TOKEN, DASHBOARD_URL, "
    f"TGBOT_LOG_LEVEL, OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_CAPTURE_CONTENT, {_COMMON_ENV}",
    "chat": f"OWNER_ID, {_MODEL_ENV}, {_DB_ENV}, {_COMMON_ENV} (BOT_TOKEN is not used)",
    "demo": f"LLM_MODEL, {_COMMON_ENV} (DATA_DIR, DATABASE_URL and BOT_TOKEN are not used)",
    "usage report": f"{_DB_ENV}, {_COMMON_ENV}",
    "context show": f"OWNER_ID, {_MODEL_ENV}, {_DB_ENV}, {_COMMON_ENV}",
    "import-legacy": f"{_DB_ENV}, {_COMMON_ENV}",
    "dashboard": f"{_DB_ENV}, DASHBOARD_PORT, DASHBOARD_TOKEN, {_COMMON_ENV}",
    "db upgrade": f"{_DB_ENV}, {_COMMON_ENV}",
    "mcp": f"OWNER_ID, {_DB_ENV}, {_COMMON_ENV}",
    "init": "BOT_TOKEN, TELEGRAM_API_BASE, the provider's key variable (e.g. DEEPSEEK_API_KEY), TZ",
    "doctor": f"BOT_TOKEN, TELEGRAM_API_BASE, {_MODEL_ENV}, {_DB_ENV}, DASHBOARD_PORT, "
    f"DASHBOARD_TOKEN, {_COMMON_ENV}",
}


Subparsers = argparse._SubParsersAction  # argparse exports no public name


def _add(
    commands: Subparsers[argparse.ArgumentParser], name: str, help: str, env: str
) -> argparse.ArgumentParser:
    """A subcommand whose help ends with the environment variables it reads."""
    return commands.add_parser(
        name,
        help=help,
        description=help,
        epilog=f"environment: {_ENV[env]}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def package_version() -> str:
    try:
        return version("tgbot")
    except PackageNotFoundError:  # a checkout that was never installed
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tgbot",
        description="A Telegram LLM bot whose history is conversation, not instructions.",
        epilog="Settings come from environment variables and an optional TOML file "
        "(--config or BOT_CONFIG); `tgbot COMMAND --help` names the variables a command reads.",
    )
    parser.add_argument("--version", action="version", version=f"tgbot {package_version()}")
    parser.add_argument("--config", metavar="PATH", help="TOML settings file (or BOT_CONFIG)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    run = _add(commands, "run", "run the bot (long polling, or --webhook)", "run")
    run.add_argument("--webhook", action="store_true", help="serve a webhook instead of polling")
    run.add_argument("--host", default="127.0.0.1", help="webhook listen address")
    run.add_argument("--port", type=int, default=8080, help="webhook listen port")
    run.add_argument(
        "--insecure-webhook",
        action="store_true",
        help="serve the webhook without WEBHOOK_SECRET (anyone who finds the URL can forge "
        "updates; for local tests only)",
    )
    run.add_argument(
        "--offline",
        action="store_true",
        help="answer with the offline model (canned replies) when no LLM_BASE_URL is set",
    )
    run.set_defaults(handler=_run, prepare=_prepare_run)

    chat = _add(
        commands,
        "chat",
        "talk to the bot in this terminal as the owner's private chat: the turns `run` "
        "takes (model, window, tools, commands, ledger, limits), nothing sent to Telegram",
        "chat",
    )
    chat.add_argument(
        "--fresh",
        action="store_true",
        help="a throw-away database and ledger, removed at the end (without OWNER_ID: a "
        "stand-in owner)",
    )
    chat.add_argument(
        "--offline",
        action="store_true",
        help="answer with the offline model (canned replies) when no LLM_BASE_URL is set",
    )
    chat.set_defaults(handler=_chat, prepare=_prepare_chat)

    demo = _add(commands, "demo", "offline end-to-end showcase (no token needed)", "demo")
    demo.add_argument("--data-dir", metavar="DIR", help="where the demo writes (default: temp)")
    demo.set_defaults(handler=_demo, prepare=_prepare_demo)

    usage = commands.add_parser("usage", help="token usage from the ledger")
    usage_commands = usage.add_subparsers(dest="usage_command", metavar="SUBCOMMAND", required=True)
    report = _add(usage_commands, "report", "per-day usage report (read-only)", "usage report")
    span = report.add_mutually_exclusive_group()
    span.add_argument("--days", type=int, default=7, help="the last N calendar days (default 7)")
    span.add_argument("--since", metavar="YYYY-MM-DD", help="every day from this date on")
    report.add_argument("--json", action="store_true", help="print JSON instead of a table")
    report.add_argument("--chat", type=int, metavar="ID", help="only this chat")
    report.set_defaults(handler=_usage_report, prepare=_prepare_read)

    context = commands.add_parser("context", help="inspect what the model is sent")
    context_commands = context.add_subparsers(
        dest="context_command", metavar="SUBCOMMAND", required=True
    )
    show = _add(
        context_commands, "show", "print the next request for a chat (read-only)", "context show"
    )
    show.add_argument("--chat", type=int, required=True, metavar="ID")
    show.add_argument("--thread", type=int, default=0, metavar="ID")
    show.set_defaults(handler=_context_show, prepare=_prepare_context_show)

    legacy = _add(
        commands, "import-legacy", "import a JSONL export of legacy rows", "import-legacy"
    )
    legacy.add_argument("file", metavar="FILE")
    legacy.set_defaults(handler=_import_legacy, prepare=_prepare_write)

    dashboard = _add(
        commands, "dashboard", "serve the operator dashboard (web, read-only)", "dashboard"
    )
    dashboard.add_argument("--host", default="127.0.0.1", help="listen address")
    dashboard.add_argument("--port", type=int, help="listen port (DASHBOARD_PORT, else 8080)")
    dashboard.set_defaults(handler=_dashboard, prepare=_prepare_read)

    db = commands.add_parser("db", help="database maintenance")
    db_commands = db.add_subparsers(dest="db_command", metavar="SUBCOMMAND", required=True)
    upgrade = _add(db_commands, "upgrade", "create or migrate the schema", "db upgrade")
    upgrade.set_defaults(handler=_db_upgrade, prepare=_prepare_write)

    doctor = _add(
        commands,
        "doctor",
        "check settings, database, DATA_DIR, token, model endpoint and dashboard port",
        "doctor",
    )
    doctor.set_defaults(handler=_doctor, prepare=None)

    mcp = commands.add_parser("mcp", help="tools from MCP servers ([[mcp.servers]])")
    mcp_commands = mcp.add_subparsers(dest="mcp_command", metavar="SUBCOMMAND", required=True)
    mcp_list = _add(mcp_commands, "list", "start each server and list its tools", "mcp")
    mcp_list.set_defaults(handler=_mcp_list, prepare=None)
    mcp_reload = _add(
        mcp_commands,
        "reload",
        "have the running bot read its servers' tool lists again (says how many cached "
        "prefixes that invalidates)",
        "mcp",
    )
    mcp_reload.set_defaults(handler=_mcp_reload, prepare=None)
    init = _add(
        commands,
        "init",
        "set up (or change) the bot: token, owner, groups, model, time zone, language; "
        "writes bot.toml and .env",
        "init",
    )
    _init_arguments(init)
    init.set_defaults(handler=_init, prepare=None)
    return parser


def _init_arguments(parser: argparse.ArgumentParser) -> None:
    from bot.app.init_options import add_arguments

    add_arguments(parser)


# ---------------------------------------------------------------- checks before heavy imports


def _prepare_run(args: argparse.Namespace, settings: Settings) -> None:
    from bot.app import preflight

    preflight.check_bot_token(settings, "run")
    if args.webhook and settings.webhook_secret is None and not args.insecure_webhook:
        # without the secret header check anyone who finds the URL can post forged updates
        raise ConfigError(
            "WEBHOOK_SECRET",
            "required for `tgbot run --webhook` (or pass --insecure-webhook to accept "
            "unauthenticated updates)",
        )
    preflight.check_offline(settings, offline=args.offline)
    from bot.app.chat_scopes import chat_scopes

    chat_scopes(settings)  # persona files readable, wake-word patterns linear
    _prepare_write(args, settings)


def _prepare_write(args: argparse.Namespace, settings: Settings) -> None:
    from bot.app import preflight

    preflight.check_database_url(settings)
    preflight.check_data_dir(settings.data_dir, create=True)


def _prepare_chat(args: argparse.Namespace, settings: Settings) -> None:
    from bot.app import preflight

    preflight.check_offline(settings, offline=args.offline)
    preflight.check_chat_owner(settings, fresh=args.fresh)
    if not args.fresh:
        _prepare_write(args, settings)


def _prepare_demo(args: argparse.Namespace, settings: Settings) -> None:
    from pathlib import Path

    from bot.app import preflight

    if args.data_dir:
        try:
            preflight.check_data_dir(Path(args.data_dir), create=True)
        except ConfigError as exc:
            raise ConfigError("--data-dir", str(exc).removeprefix("DATA_DIR: ")) from None


def _prepare_read(args: argparse.Namespace, settings: Settings) -> None:
    """Read commands say what they read, warn when there is nothing, and create nothing.

    On stderr, so `usage report --json` and `context show` keep stdout to their output; the
    dashboard, a server, says it on stdout beside its address."""
    from bot.app import preflight

    url = preflight.check_database_url(settings)
    notes = sys.stdout if args.command == "dashboard" else sys.stderr
    print(
        f"tgbot: reading DATA_DIR={settings.data_dir} and the database {preflight.mask_url(url)}",
        file=notes,
    )
    if not settings.data_dir.is_dir():
        print(f"tgbot: warning: DATA_DIR {settings.data_dir} does not exist", file=notes)
    elif not any(settings.traces_dir.glob("*.jsonl")):
        print(
            f"tgbot: warning: no ledger in {settings.traces_dir} yet (the bot writes it as it "
            "answers)",
            file=notes,
        )
    notes.flush()


def _prepare_context_show(args: argparse.Namespace, settings: Settings) -> None:
    from bot.app import preflight

    _prepare_read(args, settings)
    database = preflight.sqlite_file(settings.resolved_database_url)
    if database is not None and not database.is_file():
        raise ConfigError(
            "DATABASE_URL",
            f"no database at {database} (DATA_DIR={settings.data_dir}): nothing stored yet; "
            "`tgbot run` or `tgbot db upgrade` creates it",
        )


# ---------------------------------------------------------------- the commands


def _run(args: argparse.Namespace) -> int:
    from bot.app import serve

    if profile := os.environ.get("TGBOT_PROFILE_MODULES"):  # bench.mention_modules only
        from bot.app.profile_modules import install

        install(profile)
    return asyncio.run(
        serve.run(
            args.config,
            webhook=args.webhook,
            host=args.host,
            port=args.port,
            insecure_webhook=args.insecure_webhook,
            offline=args.offline,
        )
    )


def _chat(args: argparse.Namespace) -> int:
    from bot.app import chat_command

    return asyncio.run(chat_command.chat(args.config, fresh=args.fresh, offline=args.offline))


def _demo(args: argparse.Namespace) -> int:
    from bot.app import demo

    return asyncio.run(demo.demo(args.config, data_dir=args.data_dir, started=args.started))


def _usage_report(args: argparse.Namespace) -> int:
    from bot.app import usage_command

    return usage_command.usage_report(
        args.config, days=args.days, since=args.since, as_json=args.json, chat=args.chat
    )


def _context_show(args: argparse.Namespace) -> int:
    from bot.app import context_show

    return asyncio.run(
        context_show.context_show(args.config, chat_id=args.chat, thread_id=args.thread)
    )


def _import_legacy(args: argparse.Namespace) -> int:
    from bot.app import db_commands

    return asyncio.run(db_commands.import_legacy(args.config, args.file))


def _db_upgrade(args: argparse.Namespace) -> int:
    from bot.app import db_commands

    return asyncio.run(db_commands.db_upgrade(args.config))


def _dashboard(args: argparse.Namespace) -> int:
    from bot.app.dashboard.server import run_dashboard

    return asyncio.run(run_dashboard(args.config, host=args.host, port=args.port))


def _doctor(args: argparse.Namespace) -> int:
    from bot.app import doctor

    return asyncio.run(doctor.doctor(args.config))


def _mcp_list(args: argparse.Namespace) -> int:
    from bot.app import mcp_commands

    return asyncio.run(mcp_commands.mcp_list(args.config))


def _mcp_reload(args: argparse.Namespace) -> int:
    from bot.app import mcp_commands

    return asyncio.run(mcp_commands.mcp_reload(args.config))


def _init(args: argparse.Namespace) -> int:
    from bot.app.init_command import init
    from bot.app.init_options import parse_options

    return asyncio.run(init(parse_options(args, args.config)))


def _process_age() -> float:
    """Seconds since this process started (Linux `/proc`; 0 elsewhere)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime", encoding="ascii") as uptime:
            up = float(uptime.read().split()[0])
        return max(0.0, up - int(fields[19]) / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


def main(argv: Sequence[str] | None = None) -> int:
    # before the command's imports (the demo counts them), and the interpreter's start too
    # when this is the process's own command line
    started = time.perf_counter() - (_process_age() if argv is None else 0.0)
    # every file any command creates (database, ledger, traces, corrections, reports) is the
    # operator's alone: 0600, whichever command creates it first (`db upgrade` included)
    os.umask(0o077)
    args = build_parser().parse_args(argv)
    args.started = started
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        if args.prepare is not None:
            from bot.config import load_settings

            args.prepare(args, load_settings(args.config))
        return handler(args)
    except ConfigError as exc:
        print(f"tgbot: {exc}", file=sys.stderr)
        return 2
    except NotBuiltError as exc:
        print(f"tgbot: {exc}", file=sys.stderr)
        return 3
    except BotError as exc:
        print(f"tgbot: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

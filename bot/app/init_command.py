"""`tgbot init`: set a bot up from nothing, or change an existing set-up, in one session.

It checks the token (getMe) and says whether privacy mode is off, finds the owner's id in
the `/start` they send the bot, offers the groups the bot was added to for the allow-list,
tests one call to the chosen provider, and asks for the time zone and language. It writes
`bot.toml` (settings, never a secret) and `.env` (the token, the model key and `BOT_CONFIG`,
mode 0600). Run again, it edits both files in place (`bot.app.init_files`): the answers it
already has are the defaults, and everything else in the files stays.

In a terminal it asks plain questions; `--non-interactive` takes every answer from the flags,
the environment and the existing files, and writes nothing when the token or the model
call fails (exit code 1; a bad flag is exit code 2).
"""

from __future__ import annotations

import contextlib
import getpass
import os
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from bot.app.init_files import (
    TomlValue,
    git_checkout,
    ignored_by_git,
    read_env,
    read_toml,
    set_env_values,
    set_toml_value,
    table_name,
    write_private,
    write_readable,
)
from bot.app.init_options import (
    LOCALES,
    MODEL_TIMEOUT_SECONDS,
    PRESETS,
    PROVIDER_NAMES,
    START_WAIT_SECONDS,
    InitOptions,
    Preset,
    ProviderName,
)
from bot.app.private_chats import private_policy_said
from bot.app.probes import (
    PRIVACY_FIX,
    Group,
    Person,
    groups_seen,
    last_update_id,
    one_model_call,
    start_senders,
)
from bot.config import DEFAULT_TELEGRAM_API_BASE, ProviderProfile
from bot.errors import BotError, ConfigError

if TYPE_CHECKING:
    from adapters.telegram.probe import BotIdentity, TelegramProbe

__all__ = ["InitOptions", "init"]


class Prompter:
    """Plain questions on a terminal: `input` for answers, `getpass` for secrets."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def ask(self, question: str, default: str = "") -> str:
        hint = f" [{default}]" if default else ""
        self.out.flush()
        answer = input(f"{question}{hint}: ").strip()
        return answer or default

    def secret(self, question: str) -> str:
        self.out.flush()
        return getpass.getpass(f"{question}: ").strip()

    def confirm(self, question: str, default: bool = True) -> bool:
        hint = "Y/n" if default else "y/N"
        while True:
            answer = self.ask(f"{question} ({hint})").lower()
            if not answer:
                return default
            if answer in ("y", "yes"):
                return True
            if answer in ("n", "no"):
                return False


@dataclass(slots=True)
class _Plan:
    """What will be written."""

    toml: list[tuple[str, str, TomlValue]] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)

    def set(self, table: str, key: str, value: TomlValue) -> None:
        self.toml.append((table, key, value))


class InitFailed(BotError):
    """A check failed in `--non-interactive` mode; nothing was written."""


async def init(options: InitOptions, *, out: TextIO | None = None) -> int:
    stream = out or sys.stdout
    session = _Session(options, stream)
    try:
        return await session.run()
    except InitFailed as exc:
        session.say(f"✘ {exc}")
        session.say("Nothing was written.")
        return 1
    except EOFError:
        session.say("\nStopped: nothing was written.")
        return 1


class _Session:
    def __init__(self, options: InitOptions, out: TextIO) -> None:
        self.options = options
        self.out = out
        self.prompt = Prompter(out) if options.interactive else None
        self.config_text, self.config = read_toml(options.config)
        try:
            self.env_text = options.env_file.read_text(encoding="utf-8")
        except FileNotFoundError:
            self.env_text = ""
        except OSError as exc:
            raise ConfigError(
                "--env-file", f"cannot read {options.env_file}: {exc.strerror}"
            ) from None
        self.env = read_env(self.env_text)
        self.plan = _Plan()
        self.api_base = (
            os.environ.get("TELEGRAM_API_BASE")
            or self.env.get("TELEGRAM_API_BASE")
            or str(self.config.get("telegram_api_base") or DEFAULT_TELEGRAM_API_BASE)
        ).rstrip("/")

    def say(self, line: str = "") -> None:
        self.out.write(line + "\n")
        self.out.flush()

    async def run(self) -> int:
        updating = bool(self.config_text or self.env_text)
        self.say(
            f"Editing {self.options.config} and {self.options.env_file} (what is not asked "
            "about stays as it is)."
            if updating
            else f"Setting up a new bot: writes {self.options.config} and {self.options.env_file}."
        )
        token, me, updates = await self._telegram()
        self._owner(me, updates)
        self._groups(updates)
        await self._provider()
        self._zone()
        self._locale()
        self.plan.env["BOT_TOKEN"] = token
        if self.api_base != DEFAULT_TELEGRAM_API_BASE:
            self.plan.set("", "telegram_api_base", self.api_base)
        self.plan.env["BOT_CONFIG"] = str(self.options.config.resolve())
        self._write()
        return 0

    # ------------------------------------------------------------ Telegram

    async def _telegram(self) -> tuple[str, BotIdentity, list[dict[str, Any]]]:
        from adapters.telegram.probe import TelegramProbe

        token = self.options.token or os.environ.get("BOT_TOKEN") or self.env.get("BOT_TOKEN")
        while True:
            if self.prompt is not None and (self.options.token is None or token is None):
                if token:
                    keep = self.prompt.confirm(
                        f"Bot token: keep the one ending …{token[-4:]}", True
                    )
                    if not keep:
                        token = None
                if not token:
                    self.say("Create a bot with @BotFather (/newbot) and paste its token.")
                    token = self.prompt.secret("Bot token (hidden)")
            if not token:
                raise ConfigError("--token", "required with --non-interactive (or BOT_TOKEN)")
            try:
                async with TelegramProbe(token, self.api_base) as probe:
                    me = await probe.identify()
                    self._describe_bot(me)
                    try:
                        updates = await probe.pending_updates()
                    except ConfigError as exc:
                        # the owner and the groups cannot be read: the rest still can be set
                        self.say(f"✘ {exc}; stop it to pick the owner and the groups here")
                        return token, me, []
                    if self.prompt is not None and self.options.owner_id is None:
                        updates = await self._wait_for_start(probe, me, updates)
                return token, me, updates
            except ConfigError as exc:
                if self.prompt is None:
                    raise InitFailed(str(exc)) from None
                self.say(f"✘ {exc}")
                token = None

    def _describe_bot(self, me: BotIdentity) -> None:
        self.say(f"✔ token: @{me.username} (id {me.id}) at {self.api_base}")
        if me.reads_all_group_messages:
            self.say("✔ privacy mode is off: the bot reads every message in its groups")
        else:
            self.say(
                "✘ privacy mode is on: in groups the bot sees only commands, mentions and "
                "replies to it (memory, summaries and recall need the rest)."
            )
            self.say("  Turn it off: " + PRIVACY_FIX.format(username=me.username))

    async def _wait_for_start(
        self, probe: TelegramProbe, me: BotIdentity, updates: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Ask the operator to send `/start`; read updates until one arrives (or they skip)."""
        assert self.prompt is not None
        known = self._known_owner()
        if known is not None and self.prompt.confirm(f"Owner: keep user id {known}", True):
            return updates
        seen = list(updates)
        while not start_senders(seen):
            self.say(
                f"From your own Telegram account, open https://t.me/{me.username} and send "
                "/start (this makes you the owner)."
            )
            answer = self.prompt.ask("Press Enter once sent (or type your numeric user id)")
            if answer.lstrip("-").isdigit():
                self._typed_owner = int(answer)
                return seen
            last = last_update_id(seen)
            fresh = await probe.pending_updates(
                wait_seconds=START_WAIT_SECONDS,
                confirm_below=None if last is None else last + 1,
            )
            seen.extend(fresh)
            if not start_senders(seen):
                self.say("No /start arrived yet.")
        return seen

    _typed_owner: int | None = None

    def _known_owner(self) -> int | None:
        value = self.config.get("owner_id")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    # ------------------------------------------------------------ owner and groups

    def _owner(self, me: BotIdentity, updates: list[dict[str, Any]]) -> None:
        senders = start_senders(updates)
        owner = self.options.owner_id or self._typed_owner
        if owner is None and self.prompt is not None and senders:
            for person in reversed(senders):
                if self.prompt.confirm(f"Owner: {person.describe()} — is that you", True):
                    owner = person.id
                    break
        if owner is None and self.prompt is None and senders:
            latest: Person = senders[-1]
            self.say(
                f"  {latest.describe()} sent /start: pass --owner-id {latest.id} if that is you"
            )
        if owner is None:
            owner = self._known_owner()
        if owner is None:
            self.say(
                "✘ owner: not set — owner commands (/usage, /context, /model) and the daily "
                "summary stay off; run `tgbot init` again after sending /start, or pass "
                "--owner-id"
            )
            return
        self.plan.set("", "owner_id", owner)
        self.say(f"✔ owner: user id {owner}")

    def _groups(self, updates: list[dict[str, Any]]) -> None:
        groups = groups_seen(updates)
        current = self._current_allow_list()
        chosen = self.options.allow_chats
        if groups:
            self.say("Groups the bot was added to:")
            for number, group in enumerate(groups, 1):
                self.say(f"  {number}) {group.id}  {group.title}")
        elif self.prompt is not None:
            self.say(
                "No group seen yet (add the bot to a group, then run `tgbot init` again to "
                "allow-list it; by default every chat is allowed)."
            )
        if chosen is None and self.prompt is not None and groups:
            chosen = self._ask_allow_list(groups, current)
        if chosen is not None:
            self.plan.set("security", "allowed_chats", list(chosen))
            self.say("✔ allow-list: " + (", ".join(str(c) for c in chosen) or "empty (every chat)"))
        self._say_private_chats(current if chosen is None else list(chosen))

    def _say_private_chats(self, allowed: list[int]) -> None:
        """Which private-chat policy applies with this allow-list, and why."""
        security = self.config.get("security")
        policy = security.get("private_chats") if isinstance(security, dict) else None
        owner_known = any(key == "owner_id" for _, key, _ in self.plan.toml) or isinstance(
            self.config.get("owner_id"), int
        )
        said = private_policy_said(
            policy if isinstance(policy, str) else None, allowed, owner_known=owner_known
        )
        self.say(f"✔ private chats: {said}")

    def _ask_allow_list(self, groups: list[Group], current: list[int]) -> tuple[int, ...] | None:
        assert self.prompt is not None
        default = " ".join(str(c) for c in current) if current else ""
        while True:
            answer = self.prompt.ask(
                "Allow only these chats (numbers above or chat ids, space-separated; "
                "empty: every chat)",
                default,
            )
            chosen: list[int] = []
            for word in answer.replace(",", " ").split():
                if word.isdigit() and 1 <= int(word) <= len(groups):
                    chosen.append(groups[int(word) - 1].id)
                elif word.lstrip("-").isdigit():
                    chosen.append(int(word))
                else:
                    self.say(f"  {word!r} is neither a number above nor a chat id")
                    break
            else:
                return tuple(dict.fromkeys(chosen))

    def _current_allow_list(self) -> list[int]:
        security = self.config.get("security")
        if isinstance(security, dict) and isinstance(security.get("allowed_chats"), list):
            return [c for c in security["allowed_chats"] if isinstance(c, int)]
        return []

    # ------------------------------------------------------------ the model

    async def _provider(self) -> None:
        while True:
            name, preset = self._choose_provider()
            profile = self._profile(name, preset)
            key_env = profile.api_key_env
            key = self._api_key(key_env, preset)
            ok = await self._test_call(name, profile, key)
            while ok is None and self.prompt is not None and key_env:
                # the key was refused: ask for it again, the rest of the answers stand
                key = self.prompt.secret(f"{key_env} (the API key, hidden; empty: none)") or None
                ok = await self._test_call(name, profile, key)
            if ok or self.prompt is None:
                break
            if self.prompt.confirm("Keep these model settings anyway", False):
                break
        table = table_name("providers", name)
        self.plan.set("", "default_provider", name)
        self.plan.set(table, "base_url", profile.base_url)
        if key_env:
            self.plan.set(table, "api_key_env", key_env)
        if profile.kind is not None and profile.kind != "openai":
            self.plan.set(table, "kind", profile.kind)
        self.plan.set(table, "model", profile.model)
        if profile.context_window and not self._profile_has(name, "context_window"):
            self.plan.set(table, "context_window", profile.context_window)
        if key_env and key:
            self.plan.env[key_env] = key
        if not any(
            self._profile_value(name, f"price_{kind}_per_mtok")
            for kind in ("input", "cached_input", "output")
        ):
            self.say(
                f"  prices: not set, so costs show as 'no prices configured'; add "
                f"price_input_per_mtok, price_cached_input_per_mtok and price_output_per_mtok "
                f"to [{table}] in {self.options.config}"
            )

    def _choose_provider(self) -> tuple[ProviderName, Preset]:
        default = self.config.get("default_provider")
        current: ProviderName = (
            default if isinstance(default, str) and default in PRESETS else "deepseek"
        )
        name = self.options.provider
        if name is None and self.prompt is not None:
            self.say("Model providers:")
            for number, option in enumerate(PROVIDER_NAMES, 1):
                self.say(f"  {number}) {option} — {PRESETS[option].label}")
            while name is None:
                answer = self.prompt.ask("Provider (number or name)", current)
                if answer.isdigit() and 1 <= int(answer) <= len(PROVIDER_NAMES):
                    name = PROVIDER_NAMES[int(answer) - 1]
                elif answer in PRESETS:
                    name = answer
                else:
                    self.say(f"  choose one of: {', '.join(PROVIDER_NAMES)}")
        return (name or current), PRESETS[name or current]

    def _profile_value(self, name: str, key: str) -> Any:
        providers = self.config.get("providers")
        profile = providers.get(name) if isinstance(providers, dict) else None
        return profile.get(key) if isinstance(profile, dict) else None

    def _profile_has(self, name: str, key: str) -> bool:
        return self._profile_value(name, key) is not None

    def _profile(self, name: ProviderName, preset: Preset) -> ProviderProfile:
        def pick(flag: str | None, key: str, fallback: str, question: str) -> str:
            existing = self._profile_value(name, key)
            default = existing if isinstance(existing, str) and existing else fallback
            if flag is not None:
                return flag
            if self.prompt is not None:
                while True:
                    answer = self.prompt.ask(question, default)
                    if answer:
                        return answer
            if not default:
                raise ConfigError(f"--{key.replace('_', '-')}", f"required for {name}")
            return default

        base_url = pick(self.options.base_url, "base_url", preset.base_url, "Base URL").rstrip("/")
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError("--base-url", f"expected an http(s) URL, got {base_url!r}")
        model = pick(self.options.model, "model", preset.model, "Model")
        key_env = self.options.api_key_env
        if key_env is None:
            existing = self._profile_value(name, "api_key_env")
            key_env = existing if isinstance(existing, str) else preset.api_key_env
        window = self._profile_value(name, "context_window")
        return ProviderProfile(
            base_url=base_url,
            api_key_env=key_env or None,
            kind=preset.kind,
            model=model,
            context_window=window if isinstance(window, int) else preset.context_window,
        )

    def _api_key(self, key_env: str | None, preset: Preset) -> str | None:
        if not key_env:
            return None
        key = os.environ.get(key_env) or self.env.get(key_env)
        if self.prompt is not None:
            if key and self.prompt.confirm(f"{key_env}: keep the key ending …{key[-4:]}", True):
                return key
            answer = self.prompt.secret(f"{key_env} (the API key, hidden; empty: none)")
            return answer or None
        if not key and preset.api_key_env is not None:
            self.say(f"  {key_env} is not set: export it before `tgbot init` to store it")
        return key

    async def _test_call(self, name: str, profile: ProviderProfile, key: str | None) -> bool | None:
        """True: the model answered; None: the provider refused the key (HTTP 401 or 403);
        False: any other failure."""
        from bot.app.model_routes import build_provider

        provider = build_provider(profile, key, timeout=MODEL_TIMEOUT_SECONDS, max_retries=0)
        where = f"{name}: {profile.model} at {profile.base_url}"
        try:
            usage = await one_model_call(provider, profile.model)
        except Exception as exc:
            text = (str(exc).strip() or type(exc).__name__).splitlines()[0]
            if self.prompt is None:
                raise InitFailed(f"model {where}: {text}") from None
            self.say(f"✘ model {where}: {text}")
            return None if _REFUSED_KEY.search(text) else False
        finally:
            await provider.aclose()
        tokens = f" ({usage.input_tokens} tokens in)" if usage is not None else ""
        self.say(f"✔ model {where} answered{tokens}")
        return True

    # ------------------------------------------------------------ time and language

    def _zone(self) -> None:
        existing = self.config.get("bot_timezone")
        default = existing if isinstance(existing, str) else _local_zone()
        zone = self.options.timezone
        while True:
            if zone is None:
                zone = self.prompt.ask("Time zone (IANA name)", default) if self.prompt else default
            try:
                ZoneInfo(zone)
                break
            except (ZoneInfoNotFoundError, ValueError):
                message = f"unknown time zone {zone!r} (use an IANA name such as Asia/Shanghai)"
                if self.prompt is None:
                    raise ConfigError("--timezone", message) from None
                self.say(f"  {message}")
                zone = None
        self.plan.set("", "bot_timezone", zone)
        self.say(f"✔ time zone: {zone}")

    def _locale(self) -> None:
        existing = self.config.get("bot_locale")
        default = existing if existing in LOCALES else "auto"
        locale = self.options.locale
        while True:
            if locale is None:
                locale = (
                    self.prompt.ask(
                        "Language (auto: each member's own, zh or en; zh; en)", str(default)
                    )
                    if self.prompt
                    else str(default)
                )
            if locale in LOCALES:
                break
            if self.prompt is None:
                raise ConfigError("--locale", f"expected auto, zh or en, got {locale!r}")
            self.say("  expected auto, zh or en")
            locale = None
        self.plan.set("", "bot_locale", locale)
        self.say(f"✔ language: {locale}")

    # ------------------------------------------------------------ writing

    def _write(self) -> None:
        config = self.options.config
        text = self.config_text
        if not text:
            text = "# written by `tgbot init`; secrets live in the .env file beside it\n"
        for table, key, value in self.plan.toml:
            text = set_toml_value(text, table, key, value, source=str(config))
        env_text = self.env_text or (
            "# secrets for tgbot (written by `tgbot init`); keep this file private\n"
        )
        env_text = set_env_values(env_text, self.plan.env)
        write_readable(config, text)
        write_private(self.options.env_file, env_text)
        self.say(
            f"Wrote {config} (mode 0644: no secrets, any user can read it) and "
            f"{self.options.env_file} (mode 0600: only its owner)."
        )
        self._warn_about_git()
        tgbot = shlex.join(_own_command())
        self.say("Next:")
        self.say(f"  set -a; . {shlex.quote(str(self.options.env_file))}; set +a")
        self.say(f"  {tgbot} doctor && {tgbot} run")

    def _warn_about_git(self) -> None:
        """A file written into a git checkout is one `git add -A` away from a commit."""
        for path, holds in (
            (self.options.env_file, "the bot token and the model key"),
            (self.options.config, "the owner and the chats"),
        ):
            top = git_checkout(path)
            if top is None:
                continue
            if ignored_by_git(top, path):
                self.say(f"  {path} is in the git checkout {top}; its .gitignore keeps it out")
            else:
                self.say(
                    f"✘ {path} is in the git checkout {top} and not in its .gitignore: add it "
                    f"there, or `git add -A` commits {holds}"
                )


_REFUSED_KEY = re.compile(r"\bHTTP 40[13]\b")
"""How a provider's refusal of the key reads in the error line (`ProviderError`)."""


def _own_command() -> list[str]:
    """How to run this very `tgbot` from any directory: the script beside this interpreter
    (a virtualenv is seldom on PATH), else `python -m bot.app.cli` with its absolute path."""
    beside = Path(sys.executable).parent / "tgbot"
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside.absolute())]
    return [str(Path(sys.executable).absolute()), "-m", "bot.app.cli"]


def _local_zone() -> str:
    """The machine's zone name (TZ, /etc/timezone or the /etc/localtime link), else UTC."""
    candidates: list[str] = []
    if tz := os.environ.get("TZ"):
        candidates.append(tz.lstrip(":"))
    with contextlib.suppress(OSError):
        candidates.append(Path("/etc/timezone").read_text(encoding="utf-8").strip())
    try:
        target = os.readlink("/etc/localtime")
        if "zoneinfo/" in target:
            candidates.append(target.split("zoneinfo/", 1)[1])
    except OSError:
        pass
    for name in candidates:
        try:
            ZoneInfo(name)
            return name
        except (ZoneInfoNotFoundError, ValueError):
            continue
    return "UTC"

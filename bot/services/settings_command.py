"""`/settings`: group admins see a chat's effective settings and change those the owner
allows (`[chats] admin_may`); what each setting takes and how a change is said.

A change that alters the system prompt (`persona`, `locale`) is said first and applies only
when the admin repeats it with `confirm`: the chat's cached prefix starts over. The changes
are kept by `bot.services.chat_settings.ChatSettingsBook`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from bot.agent.chat_scope import ChatScope, ChatScopes
from bot.domain.facts import InboundMessage
from bot.domain.ids import Locale
from bot.services.chat_settings import ChatSettingsBook
from bot.services.triggers import UnsafePattern, check_linear
from bot.texts import text


class BadValue(ValueError):
    """A value `/settings` cannot take; the message says what it expects."""


def _bool(raw: str) -> bool:
    word = raw.strip().lower()
    if word in ("on", "true", "yes", "1"):
        return True
    if word in ("off", "false", "no", "0"):
        return False
    raise BadValue("expected on or off")


def _count(raw: str) -> int:
    if not raw.strip().isdigit():
        raise BadValue("expected a whole number")
    return int(raw)


def _zone(raw: str) -> str:
    try:
        ZoneInfo(raw.strip())
    except (ZoneInfoNotFoundError, ValueError):
        raise BadValue("expected an IANA time zone such as Asia/Shanghai") from None
    return raw.strip()


def _choice(*choices: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        if raw.strip() not in choices:
            raise BadValue(f"expected {' or '.join(choices)}")
        return raw.strip()

    return parse


def _words(raw: str) -> list[str]:
    return [w.strip() for w in raw.split(",") if w.strip()]


def _patterns(raw: str) -> list[str]:
    found = [p.strip() for p in raw.split(" ;; ") if p.strip()]
    for pattern in found:
        try:
            check_linear(pattern)
        except UnsafePattern as exc:
            raise BadValue(str(exc)) from None
    return found


def _text(raw: str) -> str:
    if len(raw) > 4000:
        raise BadValue("at most 4,000 characters")
    return raw.strip()


@dataclass(frozen=True, slots=True)
class Setting:
    parse: Callable[[str], Any]
    prompt: bool = False
    """Changing it changes the system prompt (a new cached prefix for the chat)."""


SETTINGS: Mapping[str, Setting] = {
    "persona": Setting(_text, prompt=True),
    "locale": Setting(_choice("zh", "en"), prompt=True),
    "route": Setting(_text),
    "timezone": Setting(_zone),
    "enabled": Setting(_bool),
    "keywords": Setting(_words),
    "patterns": Setting(_patterns),
    "ambient": Setting(_choice("off", "judge")),
    "ambient_cooldown_seconds": Setting(_count),
    "ambient_daily_max": Setting(_count),
    "answer_bots": Setting(_bool),
    "answer_on_mention": Setting(_bool),
    "answer_on_reply": Setting(_bool),
}
"""What `/settings NAME VALUE` may change (each also needs the owner's `admin_may`)."""


def effective(scope: ChatScope) -> dict[str, object]:
    """A scope's settings as `/settings` shows them."""
    t = scope.triggers
    return {
        "persona": (scope.persona[:60] + "…") if len(scope.persona) > 60 else scope.persona,
        "locale": scope.locale or "auto",
        "route": scope.route or "default",
        "timezone": scope.timezone or "bot's",
        "enabled": scope.enabled,
        "keywords": ", ".join(t.keywords),
        "patterns": " ;; ".join(t.patterns),
        "ambient": t.ambient,
        "ambient_cooldown_seconds": t.ambient_cooldown_seconds,
        "ambient_daily_max": t.ambient_daily_max,
        "answer_bots": t.answer_bots,
        "answer_on_mention": t.on_mention,
        "answer_on_reply": t.on_reply,
    }


IsAdmin = Callable[[int, int], Awaitable[bool]]


class SettingsCommand:
    """`/settings`, `/settings NAME VALUE [confirm]`, `/settings NAME reset`."""

    def __init__(
        self,
        *,
        book: ChatSettingsBook,
        scopes: ChatScopes,
        admin_may: frozenset[str],
        is_admin: IsAdmin,
        owner_id: int | None,
        route_known: Callable[[str], bool] = lambda route: True,
        locale_for: Callable[[InboundMessage], Locale] = lambda message: "en",
    ) -> None:
        self.locale_for = locale_for
        self.book = book
        self.scopes = scopes
        self.admin_may = admin_may | ({"persona"} if "persona_file" in admin_may else set())
        self.is_admin = is_admin
        self.owner_id = owner_id
        self.route_known = route_known

    async def __call__(self, message: InboundMessage) -> str:
        locale = self.locale_for(message)
        if message.chat_type == "private":
            return text(locale, "settings_private")
        owner = self.owner_id is not None and message.sender.id == self.owner_id
        if not owner and not await self.is_admin(message.chat_id, message.sender.id):
            return text(locale, "settings_admins_only")
        await self.book.refresh()
        parts = message.text.split(maxsplit=2)
        if len(parts) < 2:
            return self.show(message.chat_id, locale)
        name = parts[1].lower()
        raw = parts[2] if len(parts) > 2 else ""
        return await self.set(message, name, raw, owner=owner)

    def show(self, chat_id: int, locale: Locale = "en") -> str:
        scope = self.scopes.of(chat_id)
        lines = [text(locale, "settings_title")]
        for name, value in effective(scope).items():
            mark = " ✎" if name in self.admin_may else ""
            lines.append(f"{name}: {value}{mark}")
        lines.append(text(locale, "settings_usage"))
        return "\n".join(lines)

    async def set(self, message: InboundMessage, name: str, raw: str, *, owner: bool) -> str:
        locale = self.locale_for(message)
        setting = SETTINGS.get(name)
        if setting is None:
            return text(locale, "settings_unknown", name=name, names=", ".join(SETTINGS))
        if not owner and name not in self.admin_may:
            return text(locale, "settings_not_allowed", name=name)
        confirmed = raw.endswith(" confirm") or raw == "confirm"
        raw = raw.removesuffix("confirm").strip() if confirmed else raw.strip()
        if not raw:
            return text(locale, "settings_value_missing", name=name)
        value: object = None
        if raw != "reset":
            try:
                value = setting.parse(raw)
            except BadValue as exc:
                return text(locale, "settings_bad_value", name=name, reason=exc)
            if name == "route" and not self.route_known(str(value)):
                return text(locale, "settings_unknown_route", route=value)
        if setting.prompt and not confirmed:
            return text(locale, "settings_prompt_change", name=name, value=raw)
        await self.book.change(message.chat_id, name, value, by=message.sender.id)
        shown = effective(self.scopes.of(message.chat_id))[name]
        key = "settings_reset" if value is None else "settings_changed"
        return text(locale, key, name=name, value=shown)

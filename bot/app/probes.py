"""What `tgbot init` and `tgbot doctor` read from Telegram's answers and the model: who sent
`/start`, which groups the bot was added to (from the raw updates
`adapters.telegram.probe.TelegramProbe` reads), and one tiny model request."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.domain.messages import ChatMessage
from bot.ports import LLMProvider, LLMRequest, Usage

PRIVACY_FIX = (
    "@BotFather → /mybots → @{username} → Bot Settings → Group Privacy → Turn off, "
    "then remove the bot from each group and add it again"
)
_MEMBER_STATUSES = frozenset({"member", "administrator", "creator"})


@dataclass(frozen=True, slots=True)
class Person:
    id: int
    name: str
    username: str | None

    def describe(self) -> str:
        handle = f" (@{self.username})" if self.username else ""
        return f"{self.name}{handle}, id {self.id}"


@dataclass(frozen=True, slots=True)
class Group:
    id: int
    title: str


def start_senders(updates: Iterable[Mapping[str, Any]]) -> list[Person]:
    """Who sent `/start` to the bot in a private chat, each once, the latest last."""
    people: dict[int, Person] = {}
    for update in updates:
        message = update.get("message")
        if not isinstance(message, Mapping):
            continue
        chat, sender = message.get("chat"), message.get("from")
        text = message.get("text")
        if not (isinstance(chat, Mapping) and isinstance(sender, Mapping)):
            continue
        if chat.get("type") != "private" or not isinstance(text, str):
            continue
        if text.split("@", 1)[0].split(" ", 1)[0] != "/start":
            continue
        if sender.get("is_bot") or not isinstance(sender.get("id"), int):
            continue
        name = " ".join(
            str(part) for part in (sender.get("first_name"), sender.get("last_name")) if part
        )
        person = Person(int(sender["id"]), name or str(sender["id"]), sender.get("username"))
        people.pop(person.id, None)
        people[person.id] = person
    return list(people.values())


def groups_seen(updates: Iterable[Mapping[str, Any]]) -> list[Group]:
    """The groups the bot is in, by what the updates say: added (`my_chat_member`) or a
    message seen there, and not removed since; in the order first seen."""
    groups: dict[int, Group] = {}
    for update in updates:
        change = update.get("my_chat_member")
        message = update.get("message")
        source = change if isinstance(change, Mapping) else message
        if not isinstance(source, Mapping):
            continue
        chat = source.get("chat")
        if not isinstance(chat, Mapping) or chat.get("type") not in ("group", "supergroup"):
            continue
        chat_id = chat.get("id")
        if not isinstance(chat_id, int):
            continue
        group = Group(chat_id, str(chat.get("title") or chat_id))
        if isinstance(change, Mapping):
            new = change.get("new_chat_member")
            status = new.get("status") if isinstance(new, Mapping) else None
            member = status in _MEMBER_STATUSES or (
                status == "restricted" and isinstance(new, Mapping) and new.get("is_member")
            )
            if not member:
                groups.pop(chat_id, None)
                continue
        groups.setdefault(chat_id, group)
        if groups[chat_id].title != group.title:
            groups[chat_id] = group
    return list(groups.values())


def last_update_id(updates: Sequence[Mapping[str, Any]]) -> int | None:
    ids = [u["update_id"] for u in updates if isinstance(u.get("update_id"), int)]
    return max(ids) if ids else None


async def one_model_call(provider: LLMProvider, model: str) -> Usage | None:
    """One tiny request (a word, at most a few tokens back); its usage as reported."""
    response = await provider.complete(
        LLMRequest(
            model=model,
            messages=(ChatMessage(role="user", content="Reply with the word: ok"),),
            max_output_tokens=1,
        )
    )
    return response.usage

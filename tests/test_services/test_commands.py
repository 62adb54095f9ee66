"""Commands: which are ours, who may run the owner's, and what each answers."""

from __future__ import annotations

from datetime import UTC, datetime

from adapters.llm.scripted import ScriptedModel
from bot.agent.routes import ProfileEntry, RouteTable
from bot.context.window import ProfileCapacity
from bot.domain.facts import InboundMessage, Sender
from bot.domain.ids import SessionKey
from bot.ports import SessionInfo
from bot.services.commands import Commands
from bot.texts import text
from tests.fakes import ALICE, RecordingMessenger, inbound

OWNER = Sender(id=42, name="Owner")
CHAT = -100500
AT = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
SESSION = SessionInfo(id=7, key=SessionKey(chat_id=CHAT), scene="group")


class Routes:
    """The sessions' routes: records what `/model` stored (no stored chats)."""

    def __init__(self) -> None:
        self.set: list[tuple[int, str | None]] = []

    async def set_route(self, session_id: int, route: str | None) -> None:
        self.set.append((session_id, route))

    async def list_sessions(self) -> tuple[SessionInfo, ...]:
        return ()


def route_table() -> RouteTable:
    model = ScriptedModel()
    return RouteTable(
        {
            "default": ProfileEntry(
                provider=model,
                capacity=ProfileCapacity(name="default", model="chat", context_window=64_000),
            ),
            "big": ProfileEntry(
                provider=model,
                capacity=ProfileCapacity(name="big", model="large", context_window=200_000),
            ),
        },
        default_profile="default",
        default_model="chat",
    )


def commands(
    messenger: RecordingMessenger, store: Routes, *, retried: list[tuple[int, int]] | None = None
) -> Commands:
    async def usage() -> tuple[str, bytes | None]:
        return "usage today: 3 calls", b"\x89PNG chart"

    async def retry(session: SessionInfo, requester: int) -> bool:
        if retried is None:
            return False
        retried.append((session.id, requester))
        return True

    return Commands(
        owner_id=OWNER.id,
        locale="en",
        messenger=messenger,
        sessions=store,
        routes=route_table(),
        meters=lambda _session: None,
        usage_reply=usage,
        retry=retry,
        dashboard_link=lambda: "https://bot.example/dash?t=abc",
    )


def command(body: str, sender: Sender = OWNER, message_id: int = 1) -> InboundMessage:
    return inbound(
        chat_id=CHAT,
        message_id=message_id,
        text=body,
        sender=sender,
        at=AT,
        command=body.split()[0].split("@")[0],
    )


async def test_only_our_commands_are_handled() -> None:
    board = commands(RecordingMessenger(), Routes())

    for name in ("/usage", "/context", "/model", "/dashboard", "/retry", "/help", "/start"):
        assert board.handles(command(name))
    message = command("/weather")
    assert not board.handles(message)
    assert await board(message, SESSION) is False


async def test_an_owner_command_from_a_member_is_refused_once_a_minute() -> None:
    messenger = RecordingMessenger()
    board = commands(messenger, Routes())

    for n in range(3):
        assert await board(command("/usage", ALICE, message_id=n), SESSION)

    assert [m.text for m in messenger.sent] == [text("en", "owner_only")]
    assert messenger.photos == []


async def test_usage_answers_the_owner_with_its_text_and_chart() -> None:
    messenger = RecordingMessenger()
    await commands(messenger, Routes())(command("/usage", message_id=5), SESSION)

    assert [(m.text, m.reply_to) for m in messenger.sent] == [("usage today: 3 calls", 5)]
    assert messenger.photos == [(CHAT, b"\x89PNG chart")]


async def test_context_before_any_call_names_the_route_and_window() -> None:
    messenger = RecordingMessenger()
    await commands(messenger, Routes())(command("/context"), SESSION)

    assert messenger.sent[0].text.splitlines() == [
        "model: default:chat",
        "window: 64000",
        "no model call yet in this chat",
    ]


async def test_model_switches_to_a_known_provider_and_refuses_an_unknown_one() -> None:
    messenger, store = RecordingMessenger(), Routes()
    board = commands(messenger, store)

    await board(command("/model big"), SESSION)
    await board(command("/model nowhere:x"), SESSION)
    await board(command("/model mini"), SESSION)

    # a bare name that is no provider is a model of the default provider
    assert store.set == [(SESSION.id, "big"), (SESSION.id, "mini")]
    assert messenger.sent[0].text == text(
        "en", "model_switched", route="big:large", window="200000"
    )
    assert messenger.sent[1].text == text(
        "en", "model_unknown", name="nowhere:x", choices="default, big"
    )
    assert messenger.sent[2].text == text(
        "en", "model_switched", route="default:mini", window=text("en", "unknown")
    )  # the window is known for the configured model only


async def test_retry_runs_for_anyone_and_says_when_there_is_nothing() -> None:
    messenger = RecordingMessenger()
    retried: list[tuple[int, int]] = []
    await commands(messenger, Routes(), retried=retried)(command("/retry", ALICE), SESSION)
    await commands(messenger, Routes())(command("/retry", ALICE), SESSION)

    assert retried == [(SESSION.id, ALICE.id)]  # the requester's own turn, with their rights
    assert [m.text for m in messenger.sent] == [text("en", "nothing_to_retry")]


async def test_dashboard_gives_the_owner_a_fresh_link_and_help_answers_anyone() -> None:
    messenger = RecordingMessenger()
    board = commands(messenger, Routes())

    await board(command("/dashboard"), SESSION)
    await board(command("/help", ALICE), SESSION)

    # typed in a group: the link goes to the owner's private chat, the group is told so
    assert [(m.chat_id, m.text) for m in messenger.sent] == [
        (OWNER.id, text("en", "dashboard_link", url="https://bot.example/dash?t=abc")),
        (CHAT, text("en", "dashboard_sent_privately")),
        (CHAT, text("en", "help")),
    ]


def test_help_lists_retry_and_id_among_the_commands_for_everyone() -> None:
    for locale, owner_part in (("en", "Owner commands"), ("zh", "主人命令")):
        for_everyone, owner_only = text(locale, "help").split(owner_part)  # type: ignore[arg-type]
        assert "/retry" in for_everyone
        assert "/id" in for_everyone
        assert "/retry" not in owner_only
        assert "/usage" in owner_only

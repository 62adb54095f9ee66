"""The error list (`/errors`): failed model calls from the ledger (linked to their trace),
sends the Bot API refused and updates that were skipped, from the error log."""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from adapters.llm.scripted import ScriptedModel
from bot.agent.ledger import LedgerEntry
from bot.agent.ledger_file import LedgerWriter
from bot.app.dashboard.server import open_dashboard
from bot.app.wiring import build_app, open_store
from bot.config import Settings, load_settings
from bot.domain.facts import Sender
from bot.errors import TelegramForbidden
from bot.services.error_log import ErrorLog, read_errors
from tests.fakes import RecordingMessenger, inbound
from tests.test_app.test_dashboard.conftest import serving

Client = TestClient[web.Request, web.Application]
PRIVATE = 4242
ROW = re.compile(r'<tr data-kind="([a-z_]+)">(.*?)</tr>', re.S)
CELL = re.compile(r"<td[^>]*>(.*?)</td>", re.S)


def settings_for(data_dir: Path) -> Settings:
    return load_settings(
        data_dir=data_dir,
        bot_locale="en",
        triggers={"merge_window_seconds": 0},
        security={"user_messages_per_minute": 0, "chat_messages_per_minute": 0},
    )


async def a_refused_reply(settings: Settings) -> None:
    """A real turn in a private chat whose reply the Bot API refuses (the bot was blocked)."""
    store = await open_store(settings)
    messenger = RecordingMessenger(fail_text=None)
    messenger.fail_bubbles = {1, 2, 3}
    app = build_app(
        settings,
        store=store,
        messenger=messenger,
        bot_id=999,
        bot_name="Helper",
        offline=ScriptedModel.demo(),
    )
    try:
        await app.inbound.on_message(
            inbound(
                chat_id=PRIVATE,
                chat_type="private",
                message_id=1,
                text="hello there",
                sender=Sender(id=PRIVATE, name="Ann"),
                at=datetime.now(UTC),
            )
        )
        await app.inbound.drain()
    finally:
        await app.routes.aclose()
        await store.close()


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    settings = settings_for(tmp_path)
    await a_refused_reply(settings)
    now = datetime.now(UTC)
    LedgerWriter(settings.traces_dir, settings.zone).append(
        LedgerEntry(
            ts=now - timedelta(minutes=5),
            session=1,
            chat=-77,
            scene="group",
            turn_id="t-failed",
            provider="default",
            model="m",
            error="ProviderUnavailable: 502 <b>bad gateway</b>",
            call_id="20260101-0000000000aa",
        )
    )
    ErrorLog(settings.traces_dir, settings.zone).skipped_update(
        9001, "message.sticker.file_unique_id: Field required\n  [type=missing]"
    )
    async with serving(open_dashboard(settings)) as test_client:
        yield test_client


def rows(page: str) -> list[tuple[str, list[str]]]:
    return [(kind, CELL.findall(body)) for kind, body in ROW.findall(page)]


async def test_a_refused_reply_is_in_the_error_log(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    await a_refused_reply(settings)
    today = datetime.now(UTC).astimezone(settings.zone).date()
    logged = list(read_errors(settings.traces_dir, [today]))
    assert [(e.kind, e.chat) for e in logged] == [("refused_send", PRIVATE)]
    assert logged[0].reason == "TelegramError: injected failure"


async def test_the_error_list_shows_each_kind_newest_first(client: Client) -> None:
    response = await client.get("/errors")
    assert response.status == 200
    page = await response.text()
    found = rows(page)
    kinds = [kind for kind, _ in found]
    assert sorted(kinds[:2]) == ["refused_send", "skipped_update"]  # just now
    assert kinds[2:] == ["failed_call"]  # five minutes ago: the oldest
    by_kind = dict(found)
    failed = by_kind["failed_call"]
    assert failed[1] == "failed model call"
    assert '<a href="/chats/-77">-77</a>' in failed[2]
    # member- or provider-controlled text is escaped, and on one line
    assert html.unescape(failed[3]) == "ProviderUnavailable: 502 <b>bad gateway</b>"
    assert "<b>" not in failed[3]
    assert 'href="/calls/20260101-0000000000aa"' in failed[4]
    refused = by_kind["refused_send"]
    assert refused[1] == "refused send"
    assert f">{PRIVATE}</a>" in refused[2]
    assert refused[4] == "-"  # no trace for a send
    skipped = by_kind["skipped_update"]
    assert skipped[2] == "update 9001"
    assert skipped[3] == "message.sticker.file_unique_id: Field required [type=missing]"


async def test_a_range_without_errors_says_so(client: Client) -> None:
    page = await (await client.get("/errors?from=2026-01-01&to=2026-01-02")).text()
    assert rows(page) == []
    assert "No error in this range." in page
    assert (await client.get("/errors?from=nonsense")).status == 400


async def test_forbidden_is_recorded_with_its_class(tmp_path: Path) -> None:
    log = ErrorLog(tmp_path, UTC)
    log.refused_send(-5, TelegramForbidden("Forbidden: bot was kicked from the group chat"))
    (entry,) = read_errors(tmp_path, [datetime.now(UTC).date()])
    assert entry.reason == "TelegramForbidden: Forbidden: bot was kicked from the group chat"
    assert entry.chat == -5


async def test_a_switch_to_a_fallback_is_on_the_error_list(tmp_path: Path) -> None:
    """The primary's failed call, then the fallback that took it; the fallback's later
    calls (the session stays there) are not errors."""
    settings = settings_for(tmp_path)
    now = datetime.now(UTC)
    writer = LedgerWriter(settings.traces_dir, settings.zone)
    for seconds, route, fallback_from, error, turn in [
        (181, "main", None, "ProviderUnavailable: HTTP 503", "t1"),
        (180, "backup", "main", None, "t1"),
        (60, "backup", "main", None, "t2"),  # within the cooldown: straight there
    ]:
        writer.append(
            LedgerEntry(
                ts=now - timedelta(seconds=seconds),
                session=1,
                chat=-77,
                scene="group",
                turn_id=turn,
                provider=route,
                route=route,
                fallback_from=fallback_from,
                model=f"{route}-model",
                error=error,
                call_id=f"20260101-0000000{seconds}{route[0]}",
            )
        )
    async with serving(open_dashboard(settings)) as test_client:
        page = await (await test_client.get("/errors")).text()
    found = rows(page)
    assert [kind for kind, _ in found] == ["fallback", "failed_call"]
    switch = found[0][1]
    assert switch[1] == "fell back"
    assert switch[3] == "main was down: backup (backup-model) answered"
    assert 'href="/calls/20260101-0000000180b"' in switch[4]

"""Real update payloads (fixtures/telegram_updates) parsed and rendered as the model sees them.

Each fixture holds one update taken from a public source, with its provenance. Every one
goes through `parse_raw_update` and the projection, in both locales, and is compared with a
golden file read by a person (`golden/<name>.txt`). A reply is rendered twice: alone (the
quoted message is outside the window: the inline quote line) and after its target (the
target is in the window: `reply_to:`). An update aiogram cannot validate must not crash
the parser: read leniently (`adapters.telegram.lenient`), its golden opens with `read
leniently: <reason>`; when even that fails it says `skipped: <reason>`. A kind that is
not a message reads `not a message: <kind>`.

Regenerate after an intended change with `UPDATE_GOLDENS=1 pytest tests/test_adapters/
test_telegram_corpus.py`, then read the diff.
"""

from __future__ import annotations

import json
import os
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest
from aiogram.types import Update
from pydantic import ValidationError

from adapters.telegram.lenient import lenient_update
from bot.context.projection import project
from bot.domain.facts import InboundMessage
from bot.domain.ids import Locale, Scene
from bot.domain.records import RecordBody, StoredRecord
from bot.services.inbound_rules import record_of
from storage.payload import decode_media, decode_payload, encode_media, encode_payload
from testkit.updates import parse_raw_update

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "telegram_updates"
GOLDEN = CORPUS / "golden"
BOT_ID = 5000000001
BOT_USERNAME = "test_bot"
LOCALES: tuple[Locale, ...] = ("zh", "en")
MESSAGE_KINDS = ("message", "edited_message", "channel_post", "edited_channel_post")


def _fixtures() -> list[str]:
    return sorted(path.stem for path in CORPUS.glob("*.json"))


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CORPUS / f"{name}.json").read_text(encoding="utf-8"))
    return data


def _body(message: InboundMessage) -> RecordBody:
    return record_of(message, merged=False).body  # what the inbound service stores


def _record(seq: int, message: InboundMessage) -> StoredRecord:
    return StoredRecord(
        id=seq,
        session_id=1,
        parent_id=seq - 1 or None,
        created_at=message.date,
        body=_body(message),
        message_ids=(message.message_id,),
        alias_seq=seq,
        alias_parts=(f"m{seq}",),
    )


def _render(messages: list[InboundMessage], locale: Locale) -> str:
    records = [_record(i, m) for i, m in enumerate(messages, start=1)]
    scene: Scene = "private" if messages[-1].chat_type == "private" else "group"
    projection = project(
        records,
        current_index=len(records) - 1,
        scene=scene,
        zone=UTC,
        locale=locale,
        bot_user_id=BOT_ID,
        chat_id=messages[-1].chat_id,
    )
    return "\n---\n".join(m.content for m in projection.messages)


def _reply_target(update: dict[str, Any], locale: Locale) -> InboundMessage | None:
    """The replied-to message of the update, parsed as a message of its own."""
    for kind in MESSAGE_KINDS:
        message = update.get(kind)
        if isinstance(message, dict) and isinstance(message.get("reply_to_message"), dict):
            target = {"update_id": 0, "message": message["reply_to_message"]}
            return parse_raw_update(target, bot_id=BOT_ID, bot_username=BOT_USERNAME, locale=locale)
    return None


def _validation_reason(error: ValidationError) -> str:
    parts = []
    for item in error.errors()[:3]:
        where = ".".join(str(part) for part in item["loc"])
        parts.append(f"{where}: {item['msg']}")
    more = f" (+{error.error_count() - 3} more)" if error.error_count() > 3 else ""
    return "; ".join(parts) + more


def render_fixture(name: str) -> str:
    """The golden text of one fixture: both locales, alone and (for replies) in context."""
    update = _load(name)["update"]
    lenient = ""
    try:
        Update.model_validate(update)
    except ValidationError as error:
        if lenient_update(update) is None:
            parsed = parse_raw_update(update, bot_id=BOT_ID, bot_username=BOT_USERNAME, locale="en")
            assert parsed is None  # and it did not raise
            return f"skipped: {_validation_reason(error)}\n"
        lenient = f"read leniently: {_validation_reason(error)}\n"
    kinds = [key for key in update if key != "update_id"]
    if not any(kind in MESSAGE_KINDS for kind in kinds):
        return f"not a message: {', '.join(kinds)}\n"
    sections = []
    for locale in LOCALES:
        parsed = parse_raw_update(update, bot_id=BOT_ID, bot_username=BOT_USERNAME, locale=locale)
        assert parsed is not None, f"{name} gave no message in {locale}"
        sections.append(f"== {locale}\n{_render([parsed], locale)}")
        target = _reply_target(update, locale)
        if parsed.quote is not None and target is not None:
            in_context = _render([target, parsed], locale)
            sections.append(f"== {locale}, after its target\n{in_context}")
    return lenient + "\n".join(sections) + "\n"


@pytest.mark.parametrize("name", _fixtures())
def test_fixture_renders_as_its_golden(name: str) -> None:
    rendered = render_fixture(name)
    golden = GOLDEN / f"{name}.txt"
    if os.environ.get("UPDATE_GOLDENS"):
        GOLDEN.mkdir(exist_ok=True)
        golden.write_text(rendered, encoding="utf-8")
    assert golden.exists(), f"no golden for {name}; run with UPDATE_GOLDENS=1 and read it"
    assert rendered == golden.read_text(encoding="utf-8")


def test_every_golden_has_its_fixture() -> None:
    assert sorted(p.stem for p in GOLDEN.glob("*.txt")) == _fixtures()


@pytest.mark.parametrize("name", _fixtures())
def test_fixture_records_its_provenance(name: str) -> None:
    data = _load(name)
    source = data["source"]
    assert ("repo" in source and "path" in source) or "index_file_id" in source or "url" in source
    assert isinstance(data["update"], dict)
    assert "update_id" in data["update"]
    assert data["category"]


def test_corpus_covers_what_the_issue_lists() -> None:
    categories = {_load(name)["category"] for name in _fixtures()}
    wanted = {
        "text", "command", "reply", "edit", "channel-post", "anonymous-admin", "peer-bot",
        "via-bot", "topic", "service", "member", "reaction", "skipped-kind", "invalid",
        "external-reply", "forward:user", "forward:hidden_user", "forward:channel",
        "forward:legacy",
    }  # fmt: skip
    assert wanted <= categories
    assert len(_fixtures()) >= 100


@pytest.mark.parametrize("name", _fixtures())
def test_no_rendering_is_empty_or_an_enum_repr(name: str) -> None:
    rendered = render_fixture(name)
    assert "ContentType." not in rendered
    for section in rendered.split("== ")[1:]:
        body = section.split("\n", 1)[1]
        assert body.strip(), f"{name}: empty rendering"


@pytest.mark.parametrize("name", _fixtures())
def test_every_parsed_fact_survives_storage(name: str) -> None:
    """What renders is what was stored: the payload codec keeps every fact the parser made
    (the quote's fragment flag, chat name, original author, via_bot, content details)."""
    update = _load(name)["update"]
    for locale in LOCALES:
        parsed = parse_raw_update(update, bot_id=BOT_ID, bot_username=BOT_USERNAME, locale=locale)
        if parsed is None:
            continue
        body = _body(parsed)
        decoded, ids = decode_payload(encode_payload(body, (parsed.message_id,)))
        assert decoded == body
        assert ids == (parsed.message_id,)
        if parsed.media:
            assert decode_media(encode_media(parsed.media)) == parsed.media

"""The erasure part of the store contract (`erase_message`) on every backend: a message
deleted in the chat leaves the search index and the records at once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.domain.erasure import DELETED_MARKER
from bot.domain.facts import Media, Quote, Sender
from bot.domain.ids import SessionKey
from bot.domain.platform_messages import PlatformMessage
from bot.domain.records import AssistantRecord, ToolResult, ToolResultsRecord, UserRecord
from bot.ports import NewRecord
from tests.test_storage.conftest import Store

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
CHAT = -1001234567890123
CAROL = Sender(id=7_000_000_003, name="Carol")
BOB = Sender(id=7_000_000_002, name="Bob")


def platform(
    message_id: int, text: str, *, sender: Sender = CAROL, **extra: object
) -> PlatformMessage:
    return PlatformMessage(
        chat_id=CHAT,
        message_id=message_id,
        sender_id=sender.id,
        sender_name=sender.name,
        date=T0 + timedelta(seconds=message_id),
        text=text,
        **extra,  # type: ignore[arg-type]
    )


async def _session(store: Store) -> int:
    info = await store.open_session(SessionKey(platform="telegram", chat_id=CHAT), scene="group")
    return info.id


async def test_a_deleted_message_leaves_the_index_and_its_record(store: Store) -> None:
    sid = await _session(store)
    (pin,) = await store.append(
        sid,
        [
            NewRecord(
                body=UserRecord(sender=CAROL, text="my bankpin5519 is 5519"),
                created_at=T0,
                message_ids=(42,),
            )
        ],
        platform_messages=[platform(42, "my bankpin5519 is 5519")],
    )
    quote = Quote(id=42, sender_id=CAROL.id, timestamp=T0, summary="my bankpin5519 is 5519")
    await store.append(
        sid,
        [
            NewRecord(
                body=UserRecord(sender=BOB, text="noted", quote=quote),
                created_at=T0,
                message_ids=(43,),
            )
        ],
        platform_messages=[platform(43, "noted", sender=BOB, reply_to_message_id=42)],
    )
    assert [m.message_id for m in await store.search_messages(CHAT, 0, "bankpin5519", limit=5)] == [
        42
    ]

    assert await store.erase_message(CHAT, 42)

    assert await store.search_messages(CHAT, 0, "bankpin5519", limit=5) == ()
    assert await store.search_messages(CHAT, 0, "5519", limit=5) == ()
    kept = await store.find_platform_message(CHAT, 42)
    assert kept is not None
    assert kept.text == ""
    assert kept.sender_id == CAROL.id
    path = await store.load_path(sid)
    erased, quoting = path
    assert erased.id == pin.id
    assert erased.message_ids == (42,)
    assert erased.alias_parts == ("m1",)
    assert isinstance(erased.body, UserRecord)
    assert erased.body.deleted
    assert erased.body.text == ""
    assert erased.body.sender == CAROL
    assert isinstance(quoting.body, UserRecord)
    assert quoting.body.quote is not None
    assert quoting.body.quote.id == 42
    assert quoting.body.quote.summary == DELETED_MARKER
    assert quoting.body.text == "noted"
    assert "5519" not in repr(await store.load_history(sid, max_records=10))


async def test_unknown_message_erases_nothing(store: Store) -> None:
    await _session(store)
    assert not await store.erase_message(CHAT, 999)


async def test_one_bubble_of_a_reply_leaves_the_others(store: Store) -> None:
    sid = await _session(store)
    (_reply,) = await store.append(
        sid,
        [
            NewRecord(
                body=AssistantRecord(text="first part\nsecret part\nlast part"),
                created_at=T0,
                message_ids=(50, 51, 52),
            )
        ],
        platform_messages=[
            platform(mid, text, sender=Sender(id=1, name="bot", is_bot=True), is_bot=True)
            for mid, text in ((50, "first part"), (51, "secret part"), (52, "last part"))
        ],
    )
    assert await store.erase_message(CHAT, 51)
    (record,) = await store.load_path(sid)
    assert isinstance(record.body, AssistantRecord)
    assert record.body.text == f"first part\n{DELETED_MARKER}\nlast part"
    assert record.message_ids == (50, 51, 52)
    assert [m.message_id for m in await store.search_messages(CHAT, 0, "part", limit=5)] == [52, 50]


async def test_words_edited_out_of_a_caption_go_the_media_stays(store: Store) -> None:
    sid = await _session(store)
    photo = (Media(kind="photo"),)
    await store.append(
        sid,
        [
            NewRecord(
                body=UserRecord(sender=CAROL, text="my address is 5 Elm St", media=photo),
                created_at=T0,
                message_ids=(60,),
            )
        ],
        platform_messages=[platform(60, "my address is 5 Elm St", media=photo)],
    )
    assert await store.erase_message(CHAT, 60, keep_media=True)
    (record,) = await store.load_path(sid)
    assert isinstance(record.body, UserRecord)
    assert record.body.text == ""
    assert record.body.media == photo
    assert not record.body.deleted
    kept = await store.find_platform_message(CHAT, 60)
    assert kept is not None
    assert kept.text == ""
    assert kept.media == photo
    assert await store.search_messages(CHAT, 0, "Elm", limit=5) == ()


async def test_a_search_hit_that_showed_it_loses_the_words(store: Store) -> None:
    """A member searched before the deletion: the stored result keeps the hit's fields and
    shows `[deleted]`; other hits stay."""
    sid = await _session(store)
    await store.append(
        sid,
        [
            NewRecord(
                body=UserRecord(sender=CAROL, text="my bankpin5519 is 5519, keep it"),
                created_at=T0,
                message_ids=(42,),
            )
        ],
        platform_messages=[platform(42, "my bankpin5519 is 5519, keep it")],
    )
    hits = (
        "[quote id:m1;user:Carol;user_id:7000000003;date:2026-03-01;time:12:00;] "
        "my bankpin5519 is 5519, keep it\n"
        "[quote id:m9;user:Bob;user_id:7000000002;date:2026-03-01;time:12:05;] the pin is safe"
    )
    results = ToolResultsRecord(
        results=(ToolResult(call_id="c1", name="search_history", content=hits),)
    )
    await store.append(sid, [NewRecord(body=results, created_at=T0)])

    assert await store.erase_message(CHAT, 42)

    stored = (await store.load_path(sid))[-1].body
    assert isinstance(stored, ToolResultsRecord)
    assert stored.results[0].content == (
        "[quote id:m1;user:Carol;user_id:7000000003;date:2026-03-01;time:12:00;] "
        f"{DELETED_MARKER}\n"
        "[quote id:m9;user:Bob;user_id:7000000002;date:2026-03-01;time:12:05;] the pin is safe"
    )


async def test_a_tool_result_that_carried_its_content_is_deleted_whole(store: Store) -> None:
    """Issue 50, item 1: a document read before the deletion (`read_document` names the
    message in `content_of`) keeps its call but none of the file's words; a result that
    carried another message stays."""
    sid = await _session(store)
    document = Media(kind="document", file_id="BQAD-1", file_name="salaries.csv")
    await store.append(
        sid,
        [NewRecord(body=UserRecord(sender=CAROL, media=(document,)), created_at=T0,
                   message_ids=(42,))],
        platform_messages=[platform(42, "", media=(document,))],
    )  # fmt: skip
    results = ToolResultsRecord(
        results=(
            ToolResult(call_id="c1", name="read_document", content="alice,9100", content_of=(42,)),
            ToolResult(call_id="c2", name="read_document", content="other,1", content_of=(420,)),
        )
    )
    await store.append(sid, [NewRecord(body=results, created_at=T0)])

    assert await store.erase_message(CHAT, 42)

    stored = (await store.load_path(sid))[-1].body
    assert isinstance(stored, ToolResultsRecord)
    assert [r.content for r in stored.results] == [DELETED_MARKER, "other,1"]
    assert stored.results[0].call_id == "c1"

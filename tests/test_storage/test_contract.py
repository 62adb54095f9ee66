"""The store contract, run against every backend: memory, SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime, timedelta

import pytest

from bot.context.alias_table import AliasCounter
from bot.domain.facts import Forward, Media, Quote, Sender
from bot.domain.ids import SessionKey
from bot.domain.messages import Reasoning, ToolCall
from bot.domain.platform_messages import PlatformMessage
from bot.domain.records import (
    AssistantRecord,
    ContentBlock,
    RecordBody,
    ServiceMessageRecord,
    SummaryRecord,
    ToolResult,
    ToolResultsRecord,
    UserRecord,
)
from bot.errors import SessionNotFound, StorageError
from bot.ports import NewRecord
from storage.retention import PruneResult
from tests.fakes import SteppingClock
from tests.store_inspector import get_record, get_session
from tests.test_storage.conftest import Store

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
CHAT = -1001234567890123
BIG = 2**31 + 7  # message ids past 32 bits
ALICE = Sender(id=7_000_000_001, name="Alice", username="alice")
KEY = SessionKey(chat_id=CHAT, thread_id=2**40)


def user(text: str, *ids: int | None, at: datetime = T0) -> NewRecord:
    return NewRecord(
        body=UserRecord(sender=ALICE, text=text), created_at=at, message_ids=ids, tokens=3
    )


def reply(text: str, *ids: int | None, at: datetime = T0) -> NewRecord:
    return NewRecord(body=AssistantRecord(text=text), created_at=at, message_ids=ids, tokens=2)


def event(message_id: int, text: str = "hi", record_id: int | None = None) -> PlatformMessage:
    return PlatformMessage(
        chat_id=CHAT,
        message_id=message_id,
        sender_id=ALICE.id,
        sender_name=ALICE.name,
        date=T0,
        text=text,
        record_id=record_id,
    )


async def new_session(store: Store) -> int:
    return (await store.open_session(KEY, scene="group", title="Team")).id


async def assert_aliases_match_full_path(store: Store, session_id: int, max_records: int) -> None:
    """Aliases of the path and of the window equal one AliasCounter pass over the path."""
    path = await store.load_path(session_id)
    counter = AliasCounter()
    for record in path:
        expected = counter.assign(record.message_ids)
        assert (record.alias_seq, record.alias_parts) == (expected.seq, expected.parts)
    history = await store.load_history(session_id, max_records=max_records)
    by_id = {record.id: record for record in path}
    for record in history.records:
        assert record.alias_parts == by_id[record.id].alias_parts
        assert record.alias_seq == by_id[record.id].alias_seq
    assert history.next_alias_seq == counter.last_seq + 1


class TestSessions:
    async def test_open_creates_once_and_keeps_64_bit_ids(self, store: Store) -> None:
        first = await store.open_session(KEY, scene="group", title="Team")
        again = await store.open_session(KEY, scene="group")
        assert again == first
        assert first.key == KEY
        assert first.title == "Team"
        assert first.active_leaf_id is None
        assert await store.find_session(KEY) == first
        assert await store.find_session(SessionKey(chat_id=CHAT)) is None

    async def test_open_updates_scene_and_title(self, store: Store) -> None:
        await store.open_session(KEY, scene="group", title="Team")
        updated = await store.open_session(KEY, scene="private", title="Renamed")
        assert (updated.scene, updated.title) == ("private", "Renamed")
        kept = await store.open_session(KEY, scene="private", title=None)
        assert kept.title == "Renamed"

    async def test_concurrent_opens_share_one_session(self, store: Store) -> None:
        infos = await asyncio.gather(*(store.open_session(KEY, scene="group") for _ in range(8)))
        assert len({info.id for info in infos}) == 1
        assert len(await store.list_sessions()) == 1

    async def test_list_route_and_unknown_session(self, store: Store) -> None:
        a = await store.open_session(KEY, scene="group")
        b = await store.open_session(SessionKey(chat_id=42), scene="owner")
        await store.set_route(b.id, "deepseek/deepseek-chat")
        assert [s.id for s in await store.list_sessions()] == [a.id, b.id]
        assert (await get_session(store, b.id)).route == "deepseek/deepseek-chat"
        with pytest.raises(SessionNotFound):
            await store.load_history(999_999, max_records=5)
        with pytest.raises(SessionNotFound):
            await store.set_route(999_999, None)


class TestRecords:
    async def test_every_body_kind_round_trips(self, store: Store) -> None:
        sid = await new_session(store)
        bodies: list[RecordBody] = [
            UserRecord(
                sender=Sender(id=-100777, name="Chan", kind="channel"),
                text="看这个",
                media=(Media(kind="voice", duration=3), Media(kind="document", file_name="a.pdf")),
                quote=Quote(id=BIG, sender_id=5, timestamp=T0, summary="earlier", truncated=True),
                forward=Forward(from_name="News", from_id=9, date=T0),
                merged=True,
                blocks=(ContentBlock(type="contextRef", key="skill:x"),),
            ),
            AssistantRecord(
                text="",
                tool_calls=(ToolCall(id="c1", name="f", arguments="{}"),),
                reasoning=Reasoning(
                    format="anthropic",
                    text="hm",
                    payload='[{"type": "thinking", "thinking": "hm", "signature": "Eq\\u00e9+/="}]',
                ),
            ),
            ToolResultsRecord(
                results=(
                    ToolResult(call_id="c1", name="f", content="no", is_error=True),
                    ToolResult(
                        call_id="c2",
                        name="search_history",
                        content="[quote id:m3;] x\n[quote id:777;] y",
                        shown=(("m3", 103),),
                        shown_references=(777,),
                    ),
                )
            ),
            ServiceMessageRecord(text="Bob joined", actor=Sender(id=8, name="Bob")),
            SummaryRecord(text="they agreed"),
        ]
        new = [NewRecord(body=b, created_at=T0, tokens=i) for i, b in enumerate(bodies)]
        appended = await store.append(sid, new)
        path = await store.load_path(sid)
        assert [r.body for r in path] == bodies
        assert [r.tokens for r in path] == [0, 1, 2, 3, 4]
        assert path == appended
        assert all(r.created_at == T0 and r.created_at.tzinfo is not None for r in path)

    async def test_chain_hangs_under_the_active_leaf(self, store: Store) -> None:
        sid = await new_session(store)
        (a,) = await store.append(sid, [user("a", BIG)])
        b, c = await store.append(sid, [reply("call"), reply("result")])
        assert (a.parent_id, b.parent_id, c.parent_id) == (None, a.id, b.id)
        assert (await get_session(store, sid)).active_leaf_id == c.id
        assert await get_record(store, c.id) == c
        assert await get_record(store, c.id + 1000) is None

    async def test_branches_and_leaf_switches(self, store: Store) -> None:
        sid = await new_session(store)
        a, b = await store.append(sid, [user("a", 10), reply("b", 11)])
        (b2,) = await store.append(sid, [reply("b2", 12)], parent_id=a.id, move_leaf=False)
        assert (await get_session(store, sid)).active_leaf_id == b.id
        assert [r.id for r in await store.load_path(sid)] == [a.id, b.id]
        assert [r.id for r in await store.load_path(sid, b2.id)] == [a.id, b2.id]
        await store.set_active_leaf(sid, b2.id)
        (c,) = await store.append(sid, [user("c", 13)])
        assert [r.id for r in await store.load_path(sid)] == [a.id, b2.id, c.id]
        assert [r.id for r in await store.load_path(sid, b.id)] == [a.id, b.id]

    async def test_a_new_root_is_a_sibling_of_the_first_record(self, store: Store) -> None:
        sid = await new_session(store)
        await store.append(sid, [user("first", 10), reply("answer", 11)])
        (edited,) = await store.append(sid, [user("first, edited", 10)], at_root=True)
        assert edited.parent_id is None
        assert (edited.alias_seq, edited.alias_parts) == (1, ("m1",))
        path = await store.load_path(sid)
        assert [r.id for r in path] == [edited.id]

    async def test_records_of_another_session_are_refused(self, store: Store) -> None:
        sid = await new_session(store)
        other = (await store.open_session(SessionKey(chat_id=5), scene="private")).id
        (foreign,) = await store.append(other, [user("x", 1)])
        with pytest.raises(SessionNotFound):
            await store.set_active_leaf(sid, foreign.id)
        with pytest.raises(SessionNotFound):
            await store.set_window_start(sid, foreign.id)
        with pytest.raises(SessionNotFound):
            await store.append(sid, [user("y")], parent_id=foreign.id)
        with pytest.raises(SessionNotFound):
            await store.load_path(sid, foreign.id)
        with pytest.raises(SessionNotFound):
            await store.set_message_ids(foreign.id + 1000, [1])
        assert await store.load_path(sid) == ()

    async def test_a_failing_append_leaves_nothing(self, store: Store) -> None:
        sid = await new_session(store)
        (a,) = await store.append(sid, [user("a", 1)], platform_messages=[event(1)])
        with pytest.raises(StorageError):
            await store.append(
                sid,
                [user("b", 2), reply("c", 3)],
                platform_messages=[event(2), event(3, record_id=a.id + 10_000)],
            )
        assert [r.id for r in await store.load_path(sid)] == [a.id]
        assert (await get_session(store, sid)).active_leaf_id == a.id
        assert await store.find_platform_message(CHAT, 2) is None
        (b,) = await store.append(sid, [user("b", 2)])
        assert b.parent_id == a.id
        assert b.alias_seq == 2

    async def test_append_needs_records(self, store: Store) -> None:
        sid = await new_session(store)
        with pytest.raises(ValueError, match="at least one record"):
            await store.append(sid, [])


class TestHistoryWindow:
    async def test_empty_session(self, store: Store) -> None:
        sid = await new_session(store)
        history = await store.load_history(sid, max_records=10)
        assert (history.records, history.has_earlier, history.next_alias_seq) == ((), False, 1)

    async def test_window_start_and_record_cap(self, store: Store) -> None:
        sid = await new_session(store)
        records = await store.append(sid, [user(f"u{i}", 100 + i) for i in range(10)])
        whole = await store.load_history(sid, max_records=50)
        assert [r.id for r in whole.records] == [r.id for r in records]
        assert not whole.has_earlier
        assert whole.next_alias_seq == 11

        await store.set_window_start(sid, records[6].id)
        window = await store.load_history(sid, max_records=50)
        assert [r.id for r in window.records] == [r.id for r in records[6:]]
        assert window.has_earlier
        assert window.session.window_start_id == records[6].id
        assert [r.alias_seq for r in window.records] == [7, 8, 9, 10]

        capped = await store.load_history(sid, max_records=2)
        assert [r.id for r in capped.records] == [r.id for r in records[8:]]
        assert capped.has_earlier
        assert capped.next_alias_seq == 11

        await store.set_window_start(sid, None)
        assert len((await store.load_history(sid, max_records=50)).records) == 10

    async def test_window_start_off_the_active_branch_is_ignored(self, store: Store) -> None:
        sid = await new_session(store)
        a, b, c = await store.append(sid, [user("a", 1), user("b", 2), user("c", 3)])
        await store.set_window_start(sid, c.id)
        (c2,) = await store.append(sid, [user("c2", 4)], parent_id=b.id)
        history = await store.load_history(sid, max_records=10)
        assert [r.id for r in history.records] == [a.id, b.id, c2.id]
        assert [r.alias_seq for r in history.records] == [1, 2, 3]


class TestAliases:
    async def test_multi_bubble_replies_and_unconfirmed_slots(self, store: Store) -> None:
        sid = await new_session(store)
        records = await store.append(
            sid,
            [
                user("q", BIG),
                reply("long", BIG + 1, None, BIG + 3),
                reply("lost", None),
                user("next", BIG + 4),
            ],
        )
        assert [r.alias_parts for r in records] == [
            ("m1",),
            ("m2", None, "m2.3"),
            (None,),
            ("m3",),
        ]
        assert records[1].message_id == BIG + 1
        history = await store.load_history(sid, max_records=10)
        assert [r.alias_parts for r in history.records] == [r.alias_parts for r in records]
        assert history.next_alias_seq == 4

    async def test_a_repeated_physical_message_keeps_its_first_alias(self, store: Store) -> None:
        sid = await new_session(store)
        first = await store.append(sid, [user("a", 50), user("b", 51), reply("c", 52)])
        (again,) = await store.append(sid, [user("a again", 50)])
        (then,) = await store.append(sid, [user("d", 53)])
        assert (again.alias_seq, again.alias_parts) == (1, ("m1",))
        assert then.alias_seq == 4
        # The same id on a sibling branch is not on the path: it takes a new number.
        (side,) = await store.append(sid, [user("b'", 50)], parent_id=first[2].id)
        assert side.alias_seq == 1
        (elsewhere,) = await store.append(sid, [user("z", 53)], parent_id=first[0].id)
        assert elsewhere.alias_seq == 2
        await assert_aliases_match_full_path(store, sid, max_records=3)

    async def test_find_aliases_names_quoted_messages_outside_the_window(
        self, store: Store
    ) -> None:
        sid = await new_session(store)
        records = await store.append(sid, [user(f"u{n}", BIG + n) for n in range(6)])
        await store.set_window_start(sid, records[4].id)
        found = await store.find_aliases(sid, [BIG + 1, BIG + 3, 999])
        assert found == {BIG + 1: "m2", BIG + 3: "m4"}
        assert await store.find_aliases(sid, []) == {}

    async def test_find_aliases_ignores_a_reply_abandoned_by_a_retry(self, store: Store) -> None:
        # /retry: a second child of the question becomes the active leaf; aliases are
        # derived along the active path, and the first reply is no longer on it.
        sid = await new_session(store)
        question, first = await store.append(sid, [user("q", 100), reply("a", 200)])
        (second,) = await store.append(sid, [reply("a again", 300)], parent_id=question.id)
        await store.set_active_leaf(sid, second.id)
        assert await store.find_aliases(sid, [100, 200, 300]) == {100: "m1", 300: "m2"}
        # Back on the first branch, its reply is named again and the retry is not.
        await store.set_active_leaf(sid, first.id)
        assert await store.find_aliases(sid, [200, 300]) == {200: "m2"}

    async def test_find_aliases_names_every_bubble_of_a_reply(self, store: Store) -> None:
        sid = await new_session(store)
        bubbles = (BIG + 1, BIG + 2, None, BIG + 4)
        await store.append(sid, [user("q", BIG)])
        # As a delivered reply is stored: its bubbles' events name it.
        events = [event(mid) for mid in bubbles if mid is not None]
        await store.append(sid, [reply("long", *bubbles)], platform_messages=events)
        await store.append(sid, [user("next", BIG + 5)])
        found = await store.find_aliases(sid, [BIG + 2, BIG + 4, BIG + 5])
        assert found == {BIG + 2: "m2.2", BIG + 4: "m2.4", BIG + 5: "m3"}

    async def test_find_aliases_names_bubbles_confirmed_later(self, store: Store) -> None:
        sid = await new_session(store)
        _, answer = await store.append(sid, [user("q", 10), reply("answer", None, None)])
        await store.set_message_ids(answer.id, [11, 12])
        await store.record_platform_messages(
            [event(11, record_id=answer.id), event(12, record_id=answer.id)]
        )
        assert await store.find_aliases(sid, [12, 11]) == {11: "m2", 12: "m2.2"}

    async def test_aliases_follow_branch_switches_and_window_moves(self, store: Store) -> None:
        sid = await new_session(store)
        trunk = await store.append(
            sid, [user(f"t{i}", 1000 + i) if i % 3 else reply(f"t{i}", None) for i in range(12)]
        )
        await assert_aliases_match_full_path(store, sid, max_records=4)
        branch = await store.append(
            sid,
            [user("edit", 1004), reply("again", 2000, 2001), user("more", 2002)],
            parent_id=trunk[3].id,
        )
        await assert_aliases_match_full_path(store, sid, max_records=2)
        await store.set_window_start(sid, branch[1].id)
        await assert_aliases_match_full_path(store, sid, max_records=10)
        await store.set_active_leaf(sid, trunk[-1].id)
        await store.set_window_start(sid, trunk[8].id)
        await assert_aliases_match_full_path(store, sid, max_records=10)
        history = await store.load_history(sid, max_records=10)
        (new,) = await store.append(sid, [user("new", 3000)])
        assert new.alias_seq == history.next_alias_seq
        await store.set_active_leaf(sid, branch[-1].id)
        history = await store.load_history(sid, max_records=10)
        assert history.records[-1].alias_parts == ("m5",)
        assert history.next_alias_seq == 6

    async def test_confirming_bubbles_later(self, store: Store) -> None:
        sid = await new_session(store)
        q, r = await store.append(sid, [user("q", 10), reply("answer", None, None)])
        (follow,) = await store.append(sid, [user("follow", 12)])
        assert follow.alias_seq == 2
        updated = await store.set_message_ids(r.id, [None, 11])
        assert updated.message_ids == (None, 11)
        assert updated.message_id == 11
        assert updated.alias_parts == (None, "m2")
        assert (await get_record(store, follow.id)).alias_seq == 3  # type: ignore[union-attr]
        await assert_aliases_match_full_path(store, sid, max_records=2)
        path = await store.load_path(sid)
        assert path[1].body == AssistantRecord(text="answer")
        again = await store.set_message_ids(r.id, [11, 15])
        assert again.alias_parts == ("m2", "m2.2")
        await store.set_message_ids(q.id, [])
        await assert_aliases_match_full_path(store, sid, max_records=5)


class TestPlatformMessages:
    async def test_append_links_events_to_the_last_record(self, store: Store) -> None:
        sid = await new_session(store)
        _, b = await store.append(
            sid,
            [user("a", BIG), reply("b", BIG + 1)],
            platform_messages=[event(BIG), event(BIG + 1)],
        )
        found = await store.find_platform_message(CHAT, BIG + 1)
        assert found is not None
        assert found.record_id == b.id
        assert found.sender_id == ALICE.id
        assert found.date == T0
        assert await store.find_platform_message(CHAT + 1, BIG + 1) is None

    async def test_an_edit_updates_the_event(self, store: Store) -> None:
        sid = await new_session(store)
        (a,) = await store.append(sid, [user("a", BIG)], platform_messages=[event(BIG, "draft")])
        edited_at = T0 + timedelta(minutes=2)
        edit = PlatformMessage(
            chat_id=CHAT,
            message_id=BIG,
            sender_id=ALICE.id,
            sender_name="Alice B.",
            date=T0 + timedelta(minutes=2),
            text="final",
            media=(Media(kind="photo", file_id="F"),),
            reply_to_message_id=BIG - 1,
            edited_at=edited_at,
        )
        await store.record_platform_messages([edit])
        found = await store.find_platform_message(CHAT, BIG)
        assert found is not None
        assert (found.text, found.sender_name, found.media) == ("final", "Alice B.", edit.media)
        assert (found.record_id, found.edited_at, found.date) == (a.id, edited_at, T0)
        assert found.reply_to_message_id == BIG - 1

    async def test_events_naming_unknown_records_are_refused(self, store: Store) -> None:
        with pytest.raises(StorageError):
            await store.record_platform_messages([event(1, record_id=123_456)])
        assert await store.find_platform_message(CHAT, 1) is None


class TestClaims:
    async def test_an_update_is_claimed_once_across_tasks(self, store: Store) -> None:
        update_id = 2**33 + 1
        results = await asyncio.gather(*(store.claim_update(update_id) for _ in range(10)))
        assert sorted(results) == [False] * 9 + [True]
        assert await store.claim_update(update_id + 1)
        assert not await store.claim_update(update_id)

    async def test_a_daily_summary_is_claimed_once_across_tasks(self, store: Store) -> None:
        day = date(2026, 3, 1)
        results = await asyncio.gather(*(store.claim_daily_summary(day) for _ in range(10)))
        assert results.count(True) == 1
        assert await store.claim_daily_summary(date(2026, 3, 2))


class TestPrune:
    async def test_prunes_before_the_window_and_never_renumbers(
        self, store: Store, clock: SteppingClock
    ) -> None:
        sid = await new_session(store)
        old = T0 - timedelta(days=40)
        early = await store.append(sid, [user(f"o{i}", 10 + i, at=old) for i in range(5)])
        recent = await store.append(sid, [user(f"r{i}", 20 + i) for i in range(3)])
        await store.set_window_start(sid, early[3].id)
        await store.record_platform_messages([event(10), event(20)])
        await store.record_platform_messages(
            [PlatformMessage(chat_id=CHAT, message_id=9, sender_id=1, date=old, text="old message")]
        )
        clock.current = old
        await store.claim_update(77)
        clock.current = T0
        before = await store.load_history(sid, max_records=50)

        result = await store.prune(T0 - timedelta(days=30))

        assert result == PruneResult(records=3, platform_messages=1, updates=1)
        path = await store.load_path(sid)
        assert [r.id for r in path] == [r.id for r in early[3:] + recent]
        assert path[0].parent_id is None
        after = await store.load_history(sid, max_records=50)
        assert [(r.id, r.alias_parts) for r in after.records] == [
            (r.id, r.alias_parts) for r in before.records
        ]
        assert after.records[1:] == before.records[1:]
        assert not after.has_earlier
        assert [r.alias_seq for r in after.records] == [4, 5, 6, 7, 8]
        assert after.next_alias_seq == 9
        (new,) = await store.append(sid, [user("new", 99)])
        assert new.alias_seq == 9
        assert await store.find_platform_message(CHAT, 9) is None
        assert (await store.find_platform_message(CHAT, 10)) is not None
        assert await store.claim_update(77)

    async def test_keeps_what_is_too_new_or_has_no_window(self, store: Store) -> None:
        sid = await new_session(store)
        old = T0 - timedelta(days=40)
        _a, b, c, d = await store.append(sid, [user(f"o{i}", i + 1, at=old) for i in range(4)])
        # A newer abandoned branch hangs off `b`: `b` must stay, so only `a` may go.
        await store.append(sid, [user("retry", 50)], parent_id=b.id, move_leaf=False)
        no_window = await store.prune(T0)
        assert no_window.records == 0
        await store.set_window_start(sid, d.id)
        result = await store.prune(T0 - timedelta(days=1))
        assert result.records == 1
        assert [r.id for r in await store.load_path(sid)] == [b.id, c.id, d.id]
        assert [r.alias_seq for r in await store.load_path(sid)] == [2, 3, 4]

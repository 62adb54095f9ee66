"""The dashboard's read-only queries, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

from bot.domain.ids import SessionKey
from bot.domain.records import SummaryRecord
from bot.ports import NewRecord
from storage.dashboard import chat_windows, inbound_message_count, store_answers
from storage.engine import create_engine_for
from storage.sql import SqlStore
from tests.test_storage.test_contract import T0, event, reply, user


async def test_each_chat_shows_its_stored_window_on_the_active_path(sql_url: str) -> None:
    engine = create_engine_for(sql_url)
    store = SqlStore(engine)
    try:
        busy = (
            await store.open_session(SessionKey(chat_id=-1), scene="group", title="<b>T</b>")
        ).id
        trunk = await store.append(
            busy, [user(f"u{i}", 10 + i, at=T0 + timedelta(minutes=i)) for i in range(6)]
        )
        # an edited-away branch under the third record is not in the window
        await store.append(busy, [user("side", 99)], parent_id=trunk[2].id, move_leaf=False)
        await store.set_window_start(busy, trunk[3].id)
        # the summary the next request carries: off the path, under the record before the start
        await store.append(
            busy,
            [NewRecord(body=SummaryRecord(text="u0-u2: hello"), created_at=T0, tokens=4)],
            parent_id=trunk[2].id,
            move_leaf=False,
        )
        last = T0 + timedelta(hours=1)
        await store.append(
            busy,
            [
                NewRecord(body=SummaryRecord(text="earlier: hi"), created_at=last, tokens=5),
                reply("ok", 50, at=last),
            ],
        )
        await store.record_platform_messages([event(10), event(11)])
        quiet = (await store.open_session(SessionKey(chat_id=-2), scene="private")).id

        found = await chat_windows(engine, max_records=220)
        assert found.total == 2
        assert [w.key.chat_id for w in found.chats] == [-1, -2]  # most recent first
        first, second = found.chats
        assert first.session_id == busy
        assert first.title == "<b>T</b>"
        assert first.window_records == 5  # u3, u4, u5, the summary, the reply
        assert first.window_messages == 5
        assert first.window_tokens == 3 * 3 + 5 + 2
        assert first.has_summary
        assert first.last_activity == last
        assert first.window_start_id == trunk[3].id
        assert (second.session_id, second.window_records, second.has_summary) == (quiet, 0, False)
        assert second.last_activity is None

        capped = await chat_windows(engine, max_records=2)
        assert capped.chats[0].window_records == 2
        paged = await chat_windows(engine, max_records=220, limit=1, offset=1)
        assert [w.key.chat_id for w in paged.chats] == [-2]
        assert paged.total == 2

        assert await inbound_message_count(engine) == 2
        assert await store_answers(engine)
    finally:
        await store.close()

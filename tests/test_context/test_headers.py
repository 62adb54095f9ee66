from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo

import pytest

from bot.context.headers import Header, HeaderWalker, render_header
from bot.domain.facts import Sender
from bot.domain.ids import Scene

T0 = datetime(2026, 11, 29, 6, 3, tzinfo=UTC)  # 14:03 in Asia/Shanghai
SHANGHAI = ZoneInfo("Asia/Shanghai")
ALICE = Sender(id=1001, name="Alice")
BOB = Sender(id=1002, name="Bob")
PEER = Sender(id=2001, name="Helper", is_bot=True)
US = Sender(id=9000, name="Us", is_bot=True)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (
            Header(ids=("m12",), user_name="Alice", user_id=1001, time="14:03", reply_to="m9"),
            "[id:m12;user:Alice;user_id:1001;time:14:03;reply_to:m9;]",
        ),
        (Header(ids=("m12",), user_id=1001), "[id:m12;user_id:1001;]"),
        (Header(ids=("m7", None, "m7.3"), time="14:03"), "[parts:m7,unknown,m7.3;time:14:03;]"),
        (Header(ids=(None, None), time="14:03"), "[time:14:03;]"),
        (Header(ids=(None,)), ""),
        (
            Header(
                user_name="Helper", user_id=2001, peer_bot=True, date="2026-11-29", time="14:03"
            ),
            "[user:Helper;user_id:2001;origin:peer_bot;date:2026-11-29;time:14:03;]",
        ),
        (Header(ids=("m1",), user_name="A;b]\n[c", user_id=1), "[id:m1;user:A,b) (c;user_id:1;]"),
        (
            Header(ids=("m2",), user_id=1, via="@gif", time="14:03", reply_to="m1"),
            "[id:m2;user_id:1;via:@gif;time:14:03;reply_to:m1;]",
        ),
        (Header(ids=("m2",), via="@x;]\n[id:m9"), "[id:m2;via:@x,) (id:m9;]"),
        (
            Header(ids=("m3",), user_id=7, via="@gif", paid_stars=50, time="15:06"),
            "[id:m3;user_id:7;via:@gif;paid_stars:50;time:15:06;]",
        ),
    ],
    ids=[
        "full",
        "short",
        "parts-with-unknown",
        "unconfirmed-no-id",
        "empty",
        "peer-bot",
        "name",
        "via-after-sender-fields",
        "forged-via",
        "paid-stars-after-via",
    ],
)
def test_render_header(header: Header, expected: str) -> None:
    assert render_header(header) == expected


def walk(
    steps: Sequence[tuple[datetime, Sender | None]], *, scene: Scene = "group", zone: tzinfo = UTC
) -> list[str]:
    walker = HeaderWalker(zone=zone, scene=scene, bot_user_id=US.id)
    return [walker.header(ids=(), at=at, sender=sender) for at, sender in steps]


def test_full_form_first_then_short_then_full_after_rename() -> None:
    renamed = Sender(id=1001, name="Alice W")
    steps = [(T0, ALICE), (T0, BOB), (T0, ALICE), (T0, renamed), (T0, renamed), (T0, ALICE)]
    assert walk(steps) == [
        "[user:Alice;user_id:1001;date:2026-11-29;time:06:03;]",
        "[user:Bob;user_id:1002;]",
        "[user_id:1001;]",
        "[user:Alice W;user_id:1001;]",
        "[user_id:1001;]",
        "[user:Alice;user_id:1001;]",
    ]


def test_peer_bot_and_our_own_bot() -> None:
    assert walk([(T0, PEER), (T0, PEER), (T0, US)]) == [
        "[user:Helper;user_id:2001;origin:peer_bot;date:2026-11-29;time:06:03;]",
        "[user_id:2001;origin:peer_bot;]",
        "[user:Us;user_id:9000;]",
    ]


@pytest.mark.parametrize("scene", ["private", "owner"], ids=["private", "owner"])
def test_private_scenes_omit_the_human_but_keep_bots(scene: Scene) -> None:
    assert walk([(T0, ALICE), (T0, PEER), (T0 + timedelta(minutes=1), None)], scene=scene) == [
        "[date:2026-11-29;time:06:03;]",
        "[user:Helper;user_id:2001;origin:peer_bot;]",
        "[time:06:04;]",
    ]


def test_time_is_shown_60_seconds_after_the_last_shown_time_not_the_last_message() -> None:
    steps = [(T0 + timedelta(seconds=40 * k), None) for k in range(6)]
    # 0s shown; 40s no; 80s shown (>=60 after 0); 120s no (40 after 80); 160s shown; 200s no
    assert walk(steps) == [
        "[date:2026-11-29;time:06:03;]",
        "",
        "[time:06:04;]",
        "",
        "[time:06:05;]",
        "",
    ]


def test_exactly_60_seconds_shows_time() -> None:
    assert walk(
        [(T0, None), (T0 + timedelta(seconds=59), None), (T0 + timedelta(seconds=60), None)]
    ) == [
        "[date:2026-11-29;time:06:03;]",
        "",
        "[time:06:04;]",
    ]


def test_date_on_a_new_day_in_the_configured_zone() -> None:
    # 15:59:30 UTC is 23:59 in Shanghai; 16:00:10 UTC is the next day there (40 s later)
    late = datetime(2026, 11, 29, 15, 59, 30, tzinfo=UTC)
    steps = [
        (late, None),
        (late + timedelta(seconds=40), None),
        (late + timedelta(seconds=50), None),
    ]
    assert walk(steps, zone=SHANGHAI) == [
        "[date:2026-11-29;time:23:59;]",
        "[date:2026-11-30;time:00:00;]",
        "",
    ]
    # the same instants in UTC are one day
    assert walk(steps) == ["[date:2026-11-29;time:15:59;]", "", ""]


def test_naive_datetimes_are_utc() -> None:
    assert walk([(datetime(2026, 11, 29, 6, 3), None)], zone=SHANGHAI) == [
        "[date:2026-11-29;time:14:03;]"
    ]


def test_ids_and_reply_to_through_the_walker() -> None:
    walker = HeaderWalker(zone=SHANGHAI, scene="group", bot_user_id=US.id)
    first = walker.header(ids=("m9",), at=T0, sender=ALICE)
    second = walker.header(ids=("m12",), at=T0, sender=ALICE, reply_to="m9")
    assert first == "[id:m9;user:Alice;user_id:1001;date:2026-11-29;time:14:03;]"
    assert second == "[id:m12;user_id:1001;reply_to:m9;]"


def test_via_bot_is_shown_on_every_message_and_in_private_scenes() -> None:
    via = Sender(id=1001, name="Alice", via_bot="@gif")
    assert walk([(T0, via), (T0, via)]) == [
        "[user:Alice;user_id:1001;via:@gif;date:2026-11-29;time:06:03;]",
        "[user_id:1001;via:@gif;]",
    ]
    assert walk([(T0, via), (T0, ALICE)], scene="private") == [
        "[via:@gif;date:2026-11-29;time:06:03;]",
        "",
    ]

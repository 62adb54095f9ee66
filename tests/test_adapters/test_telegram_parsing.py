"""Bot API update JSON (tests/fixtures/telegram) parsed into exact `InboundMessage` facts."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.domain.facts import Forward, InboundMessage, Media, Quote, Sender
from bot.domain.ids import Locale
from testkit.updates import parse_raw_update

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "telegram"
BOT_ID = 5000000001
GROUP = -1001234567890
FORUM = -1005555555555
NEWS = -1009876543210

ALICE = Sender(id=1001, name="Alice Liu", username="alice")
ALICE_NO_USERNAME = Sender(id=1001, name="Alice Liu")
BOB = Sender(id=1002, name="Bob", username="bob_b")
BOB_PLAIN = Sender(id=1002, name="Bob")


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    return data


def at(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def group(message_id: int, date: int, sender: Sender, **facts: Any) -> InboundMessage:
    return InboundMessage(
        chat_id=GROUP,
        chat_type="supergroup",
        chat_title="Tea Room",
        message_id=message_id,
        date=at(date),
        sender=sender,
        **facts,
    )


CASES: dict[str, InboundMessage | None] = {
    "private_text": InboundMessage(
        update_id=900001,
        chat_id=1001,
        chat_type="private",
        message_id=11,
        date=at(1764396180),
        sender=ALICE,
        text="hello\nthere",
        language_code="zh-hans",
    ),
    "group_mention": group(
        201, 1764396240, BOB, update_id=900002, text="@Test_Bot what time is it?", mentions_bot=True
    ),
    "reply_to_bot": group(
        205,
        1764396300,
        ALICE,
        update_id=900003,
        text="are you sure?",
        replies_to_bot=True,
        quote=Quote(
            id=204,
            sender_id=BOT_ID,
            timestamp=at(1764396280),
            summary="The meeting moved to Friday.",
            chat_id=GROUP,
        ),
    ),
    "reply_to_photo_long_caption": group(
        206,
        1764396310,
        BOB,
        update_id=900004,
        text="wow",
        quote=Quote(
            id=203,
            sender_id=1001,
            timestamp=at(1764396200),
            summary=(
                "[图片] Sunset over the harbour, taken from the ferry on the way back home after "
                "the long conference day; the light was unr"
            ),
            truncated=True,
            chat_id=GROUP,
        ),
    ),
    "external_reply": group(
        207,
        1764396320,
        ALICE_NO_USERNAME,
        update_id=900005,
        text="see this",
        quote=Quote(
            id=4321,
            sender_id=NEWS,
            timestamp=at(1764390000),
            summary="[视频 12s] Rain expected on Friday",
            chat_id=NEWS,
            fragment=True,
            chat_name="Daily News",
        ),
    ),
    "external_reply_hidden_text": group(
        227,
        1764397010,
        BOB_PLAIN,
        update_id=900029,
        text="agreed",
        quote=Quote(
            id=0,
            timestamp=at(1764001000),
            summary="the whole thing",
            fragment=True,
            chat_name="另一个聊天",  # the update named no chat
        ),
    ),
    "partial_quote": group(
        208,
        1764396330,
        BOB,
        update_id=900006,
        text="did you?",
        quote=Quote(
            id=190,
            sender_id=1001,
            timestamp=at(1764300000),
            summary="call mom",
            chat_id=GROUP,
            fragment=True,
        ),
    ),
    "album_photo_1": group(
        210,
        1764396400,
        ALICE_NO_USERNAME,
        update_id=900007,
        text="our trip",
        media=(
            Media(
                kind="photo",
                file_id="AgAD-a1-large",
                file_unique_id="a1l",
                width=1280,
                height=960,
                mime_type="image/jpeg",
            ),
        ),
        media_group_id="13860195811234567",
    ),
    "album_photo_2": group(
        211,
        1764396400,
        ALICE_NO_USERNAME,
        update_id=900008,
        media=(
            Media(
                kind="photo",
                file_id="AgAD-a2-large",
                file_unique_id="a2l",
                width=1280,
                height=960,
                mime_type="image/jpeg",
            ),
        ),
        media_group_id="13860195811234567",
    ),
    "voice": InboundMessage(
        update_id=900009,
        chat_id=1001,
        chat_type="private",
        message_id=12,
        date=at(1764396500),
        sender=ALICE_NO_USERNAME,
        media=(
            Media(
                kind="voice",
                duration=3,
                file_id="AwAD-voice",
                file_unique_id="vo1",
                mime_type="audio/ogg",
                file_size=8123,
            ),
        ),
    ),
    "sticker": group(
        213,
        1764396510,
        BOB_PLAIN,
        update_id=900010,
        media=(
            Media(
                kind="sticker",
                emoji="😀",
                title="HappyFaces",  # its set, as people name stickers
                file_id="CAAD-sticker",
                file_unique_id="st1",
                width=512,
                height=512,
                mime_type="image/webp",
                file_size=22000,
            ),
        ),
    ),
    "document": group(
        214,
        1764396520,
        ALICE_NO_USERNAME,
        update_id=900011,
        text="numbers for Q3",
        media=(
            Media(
                kind="document",
                file_name="Q3 report.pdf",
                file_id="BQAD-doc",
                file_unique_id="d1",
                mime_type="application/pdf",
                file_size=250000,
            ),
        ),
    ),
    "forward_hidden_user": group(
        215,
        1764396530,
        BOB_PLAIN,
        update_id=900012,
        text="a secret recipe",
        forward=Forward(from_name="Mystery Person", hidden=True, date=at(1764000000)),
    ),
    "forward_channel": group(
        216,
        1764396540,
        BOB_PLAIN,
        update_id=900013,
        text="Markets closed higher",
        forward=Forward(from_name="Daily News (Ed)", from_id=NEWS, date=at(1764395000)),
    ),
    "forum_topic_message": InboundMessage(
        update_id=900014,
        chat_id=FORUM,
        chat_type="supergroup",
        chat_title="Dev Forum",
        thread_id=300,
        message_id=320,
        date=at(1764396600),
        sender=ALICE_NO_USERNAME,
        text="v1.2 is out",
        topic_first_name="Releases",  # the implicit reply to the topic's first message
    ),
    "forum_topic_reply": InboundMessage(
        update_id=900015,
        chat_id=FORUM,
        chat_type="supergroup",
        chat_title="Dev Forum",
        thread_id=300,
        message_id=322,
        date=at(1764396660),
        sender=BOB_PLAIN,
        text="thanks",
        replies_to_bot=True,
        quote=Quote(
            id=321,
            sender_id=BOT_ID,
            timestamp=at(1764396630),
            summary="Changelog posted.",
            chat_id=FORUM,
        ),
    ),
    "anonymous_admin": group(
        217,
        1764396700,
        Sender(id=GROUP, name="Tea Room (owner)", kind="anonymous_admin"),  # signed
        update_id=900016,
        text="Please keep it civil.",
    ),
    "linked_channel_post": group(
        218,
        1764396710,
        Sender(id=NEWS, name="Daily News", username="dailynews", kind="channel"),
        update_id=900017,
        text="Evening edition is live",
        forward=Forward(from_name="Daily News", from_id=NEWS, date=at(1764396705)),
        automatic_forward=True,
    ),
    "edited_message": group(
        201,
        1764396240,
        BOB,
        update_id=900018,
        text="@test_bot what time is it in Tokyo?",
        mentions_bot=True,
        is_edit=True,
        edit_date=at(1764396800),
    ),
    "service_members_joined": group(
        219, 1764396900, BOB_PLAIN, update_id=900019, event="Bob 邀请 Carol, Dan Wu 加入了群组"
    ),
    "service_member_left": group(
        220,
        1764396910,
        Sender(id=1004, name="Dan Wu"),
        update_id=900020,
        event="Dan Wu 离开了群组",
    ),
    "service_title_changed": InboundMessage(
        update_id=900021,
        chat_id=GROUP,
        chat_type="supergroup",
        chat_title="Tea House",
        message_id=221,
        date=at(1764396920),
        sender=ALICE_NO_USERNAME,
        event="Alice Liu 将群名改为「Tea House」",
    ),
    "service_pinned": group(
        222,
        1764396930,
        ALICE_NO_USERNAME,
        update_id=900022,
        event="Alice Liu 置顶了消息 #204：The meeting moved to Friday.",
    ),
    "astral_emoji": group(
        223,
        1764396940,
        Sender(id=1002, name="Bob 𝕏 👨‍👩‍👧"),
        update_id=900023,
        text="Hi 𝕏 👨‍👩‍👧 @test_bot and @other_bot",
        mentions_bot=True,
    ),
    "command_other_bot": group(
        224, 1764396950, ALICE_NO_USERNAME, update_id=900024, text="/start@other_bot hi"
    ),
    "command_ours": group(
        225,
        1764396960,
        ALICE_NO_USERNAME,
        update_id=900025,
        text="/Usage@test_bot 7",
        command="usage",
    ),
    "text_mention": group(
        226,
        1764396970,
        ALICE_NO_USERNAME,
        update_id=900026,
        text="/help ask Test Bot (user_id:5000000001)",  # the mention names its user
        command="help",
        mentions_bot=True,
    ),
    "channel_post": InboundMessage(
        update_id=900028,
        chat_id=NEWS,
        chat_type="channel",
        chat_title="Daily News",
        message_id=4402,
        date=at(1764397000),
        sender=Sender(id=NEWS, name="Daily News (Ed)", username="dailynews", kind="channel"),
        text="Breaking: tea prices fall",
    ),
    "callback_query": None,
}


def test_every_fixture_has_a_case() -> None:
    assert sorted(p.stem for p in FIXTURES.glob("*.json")) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES), ids=sorted(CASES))
def test_fixture_parses_to_exact_facts(name: str) -> None:
    parsed = parse_raw_update(load(name), bot_id=BOT_ID, bot_username="test_bot", locale="zh")
    assert parsed == CASES[name]


EN_CASES = {
    "voice": ("[voice 3s]", None),
    "sticker": ("[sticker 😀 HappyFaces]", None),
    "document": ("[file Q3 report.pdf] numbers for Q3", None),
    "service_members_joined": (None, "Bob added Carol, Dan Wu to the group"),
    "service_member_left": (None, "Dan Wu left the group"),
    "service_title_changed": (None, 'Alice Liu changed the group title to "Tea House"'),
    "service_pinned": (None, "Alice Liu pinned message #204: The meeting moved to Friday."),
}


@pytest.mark.parametrize("name", sorted(EN_CASES), ids=sorted(EN_CASES))
def test_english_locale_for_events_and_quoted_media(name: str) -> None:
    """Media placeholders are checked through a reply quoting the fixture's message."""
    placeholder, event = EN_CASES[name]
    data = load(name)
    parsed = parse_raw_update(data, bot_id=BOT_ID, bot_username="test_bot", locale="en")
    assert parsed is not None
    assert parsed.event == event
    if placeholder is not None:
        reply = {
            "update_id": 1,
            "message": {
                "message_id": 999,
                "chat": data["message"]["chat"],
                "date": 1764400000,
                "text": "?",
                "reply_to_message": data["message"],
            },
        }
        quoted = parse_raw_update(reply, bot_id=BOT_ID, bot_username=None, locale="en")
        assert quoted is not None
        assert quoted.quote is not None
        assert quoted.quote.summary == placeholder


def test_unknown_bot_username_never_claims_an_addressed_command() -> None:
    parsed = parse_raw_update(load("command_ours"), bot_id=BOT_ID, bot_username=None, locale="en")
    assert parsed is not None
    assert parsed.command is None
    assert parsed.mentions_bot is False


def test_odd_input_gives_none_and_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    assert (
        parse_raw_update(
            {"update_id": 5, "message": {"text": "no chat"}},
            bot_id=BOT_ID,
            bot_username="x",
            locale="zh",
        )
        is None
    )
    assert "invalid update 5" in caplog.text


# ---------------------------------------------------------------- who said what

CORPUS = FIXTURES.parent / "telegram_updates"


def corpus(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CORPUS / f"{name}.json").read_text(encoding="utf-8"))
    return data["update"]  # type: ignore[no-any-return]


def parse(data: dict[str, Any], locale: Locale = "en") -> InboundMessage:
    parsed = parse_raw_update(data, bot_id=BOT_ID, bot_username="test_bot", locale=locale)
    assert parsed is not None
    return parsed


def message_with(**fields: Any) -> dict[str, Any]:
    return {
        "update_id": 1,
        "message": {
            "message_id": 50,
            "date": 1764400000,
            "chat": {"id": GROUP, "type": "supergroup", "title": "Tea Room"},
            "from": {"id": 1002, "is_bot": False, "first_name": "Bob"},
            "text": "look",
            **fields,
        },
    }


DAN = {"id": 77, "is_bot": False, "first_name": "Dan", "last_name": "Wu"}
NEWS_CHAT = {"id": NEWS, "type": "channel", "title": "Daily News", "username": "dailynews"}


@pytest.mark.parametrize(
    ("modern", "legacy", "expected"),
    [
        (
            {"type": "user", "date": 1764300000, "sender_user": DAN},
            {"forward_from": DAN, "forward_date": 1764300000},
            Forward(from_name="Dan Wu", from_id=77, date=at(1764300000)),
        ),
        (
            {"type": "hidden_user", "date": 1764300000, "sender_user_name": "Mystery"},
            {"forward_sender_name": "Mystery", "forward_date": 1764300000},
            Forward(from_name="Mystery", hidden=True, date=at(1764300000)),
        ),
        (
            {"type": "channel", "date": 1764300000, "chat": NEWS_CHAT, "message_id": 9},
            {"forward_from_chat": NEWS_CHAT, "forward_date": 1764300000},
            Forward(from_name="Daily News", from_id=NEWS, date=at(1764300000)),
        ),
        (
            {
                "type": "chat",
                "date": 1764300000,
                "sender_chat": {"id": GROUP, "type": "supergroup", "title": "Tea Room"},
                "author_signature": "mod",
            },
            {
                "forward_from_chat": {"id": GROUP, "type": "supergroup", "title": "Tea Room"},
                "forward_signature": "mod",
                "forward_date": 1764300000,
            },
            Forward(from_name="Tea Room (mod)", from_id=GROUP, date=at(1764300000)),
        ),
    ],
    ids=["user", "hidden-user", "channel", "chat-signed"],
)
def test_legacy_forward_fields_give_the_same_forward(
    modern: dict[str, Any], legacy: dict[str, Any], expected: Forward
) -> None:
    assert parse(message_with(forward_origin=modern)).forward == expected
    assert parse(message_with(**legacy)).forward == expected


def test_a_reply_to_a_forward_names_the_original_author() -> None:
    parsed = parse(corpus("group_reply_to_legacy_forward_from"))
    assert parsed.quote is not None
    assert parsed.quote.forwarded_from == "Daniil Okhlopkov"
    assert parsed.quote.sender_id == 1440913096  # who forwarded it, kept as the sender


def test_via_bot_is_kept_on_the_sender() -> None:
    parsed = parse(corpus("private_via_bot_inline_keyboard"))
    assert parsed.sender.via_bot == "@redzonetest2_bot"
    assert parsed.text == "message text"


def test_an_external_reply_names_its_chat_and_keeps_its_content() -> None:
    parsed = parse(corpus("nam_via_bot_external_reply_quote_filled"))
    assert parsed.quote == Quote(
        id=11,
        sender_id=8,
        timestamp=at(1749000000),
        summary="[poll Best?] the quoted bit",
        chat_id=-1002,
        fragment=True,
        chat_name="News",
    )


def test_an_external_reply_from_another_topic_of_this_chat_is_an_ordinary_quote() -> None:
    origin = {"type": "user", "date": 1764300000, "sender_user": DAN}
    here = {"id": GROUP, "type": "supergroup", "title": "Tea Room"}
    parsed = parse(message_with(external_reply={"origin": origin, "chat": here, "message_id": 9}))
    assert parsed.quote is not None
    assert parsed.quote.chat_name is None
    assert parsed.quote.chat_id == GROUP


def test_a_poll_is_a_placeholder_with_its_options_not_member_text() -> None:
    poll = {
        "id": "p",
        "question": "Lunch?",
        "options": [
            {"text": "noodles", "voter_count": 0, "persistent_id": "a"},
            {"text": "rice", "voter_count": 0, "persistent_id": "b"},
        ],
        "total_voter_count": 0,
        "is_closed": False,
        "is_anonymous": True,
        "type": "regular",
        "allows_multiple_answers": False,
        "allows_revoting": False,
        "members_only": False,
    }
    data = message_with(poll=poll)
    del data["message"]["text"]
    parsed = parse(data)
    assert parsed.text == ""
    assert parsed.media == (Media(kind="poll", title="Lunch?", detail="noodles / rice"),)


def test_a_reply_to_a_service_message_quotes_its_description() -> None:
    target = message_with(giveaway_created={"prize_star_count": 500})["message"]
    del target["text"]
    parsed = parse(message_with(reply_to_message=target), locale="zh")
    assert parsed.quote is not None
    assert parsed.quote.summary == "Bob 创建了抽奖（500 星）"


def test_a_field_from_a_newer_bot_api_renders_as_unsupported_content() -> None:
    data = message_with(shiny_new_content={"x": 1})
    del data["message"]["text"]
    parsed = parse(data)
    assert parsed.media == (Media(kind="unknown"),)
    assert parsed.event is None


def test_a_private_message_without_from_is_the_other_person() -> None:
    parsed = parse(corpus("service_chat_shared_no_sender"))
    assert parsed.sender == Sender(id=250918540, name="Андрей Власов", username="aka_dude")
    assert parsed.event == 'Андрей Власов shared the chat "384939"'


def test_a_poll_keeps_its_votes_and_whether_it_is_closed() -> None:
    """Bot API `Poll.total_voter_count` and `is_closed`: what members ask about a vote."""
    from bot.context.placeholders import media_placeholder

    poll = {
        "id": "p",
        "question": "Lunch?",
        "options": [
            {"text": "noodles", "voter_count": 4, "persistent_id": "a"},
            {"text": "rice", "voter_count": 3, "persistent_id": "b"},
        ],
        "total_voter_count": 7,
        "is_closed": True,
        "is_anonymous": True,
        "type": "regular",
        "allows_multiple_answers": False,
        "allows_revoting": False,
        "members_only": False,
    }
    data = message_with(poll=poll)
    del data["message"]["text"]
    (media,) = parse(data).media
    assert (media.value, media.closed) == (7, True)
    assert media_placeholder(media, "en") == "[poll 7 votes: Lunch?: noodles / rice (closed)]"
    assert media_placeholder(media, "zh") == "[投票 7 票: Lunch?: noodles / rice （已结束）]"


def test_a_reply_to_a_message_telegram_no_longer_shows_has_no_sender_or_date() -> None:
    """An InaccessibleMessage (`date` 0, no `from`): the quote knows its id only, never
    `user_id:0` on 1970-01-01."""
    data = message_with(
        reply_to_message={"message_id": 7, "date": 0, "chat": {"id": GROUP, "type": "supergroup"}}
    )
    quote = parse(data).quote
    assert quote is not None
    assert (quote.id, quote.sender_id, quote.timestamp) == (7, None, None)


@pytest.mark.parametrize(
    "name", ["service_migrate_to_chat_id", "service_migrate_from_chat_id_anonymous"]
)
def test_a_group_upgraded_to_a_supergroup_names_both_chat_ids(name: str) -> None:
    """Either half of Telegram's pair (issue_427 of teloxide, as recorded) says which chat
    became which: what is kept per chat (memory facts) follows it."""
    assert parse(corpus(name)).chat_migration == (-599075523, -1001555296434)


def test_an_ordinary_message_is_no_chat_migration() -> None:
    assert parse(message_with()).chat_migration is None


# ---------------------------------------------------------------- facts members care about


def test_a_reply_to_a_checklist_task_names_the_task_and_its_text() -> None:
    parsed = parse(corpus("private_reply_to_checklist_task"))
    assert parsed.quote is not None
    assert (parsed.quote.id, parsed.quote.task) == (5, 2)
    assert parsed.quote.summary == "Telur"  # the task, not the whole checklist
    assert parsed.quote.fragment is True


def test_a_task_the_checklist_no_longer_lists_keeps_its_id_and_the_checklist() -> None:
    data = corpus("private_reply_to_checklist_task")
    data["message"]["reply_to_checklist_task_id"] = 9
    parsed = parse(data)
    assert parsed.quote is not None
    assert parsed.quote.task == 9
    assert parsed.quote.fragment is False
    assert parsed.quote.summary == "[checklist Belanja: ✓ Beras / Telur]"
    del data["message"]["reply_to_checklist_task_id"]
    plain = parse(data)
    assert plain.quote is not None
    assert plain.quote.task is None


def test_a_paid_message_keeps_its_star_count() -> None:
    parsed = parse(corpus("nam_paid_star_count"))
    assert parsed.paid_stars == 50
    assert parse(message_with()).paid_stars is None


def test_a_reply_to_a_story_names_the_story_and_its_chat_never_a_message() -> None:
    parsed = parse(corpus("group_reply_to_story"))
    assert parsed.quote == Quote(
        id=0,
        summary="[story]",
        chat_id=1,
        chat_name="super-group-title",
        story=1,
    )
    channel = parse(corpus("nam_anonymous_admin_signature"))
    assert channel.quote is not None
    assert (channel.quote.story, channel.quote.chat_name) == (4, "Stories")

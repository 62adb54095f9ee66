"""Issue 24 item 8: a membership update aiogram cannot validate is read leniently.

The real payload (fixtures/telegram_updates/member_promoted_without_rights.json) promotes a
member to administrator without the administrator rights fields aiogram requires. The
poller reads it anyway: the chat and the new status reach the membership parser, so a
promotion is never lost. Any other update that does not validate is still skipped."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from aiogram import Bot
from aiogram.types import ChatMemberAdministrator

from adapters.telegram.chat_event_parsing import parse_membership
from adapters.telegram.lenient import lenient_membership
from adapters.telegram.polling_loop import validate_updates

FIXTURE = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "telegram_updates"
    / "member_promoted_without_rights.json"
)


def promoted() -> dict[str, Any]:
    update: dict[str, Any] = json.loads(FIXTURE.read_text(encoding="utf-8"))["update"]
    return update


def test_a_promotion_without_rights_fields_is_read_with_its_chat_and_status() -> None:
    bot = Bot("123456:TEST-token")
    updates, skipped = validate_updates([promoted()], bot)
    assert skipped == []
    [update] = updates
    assert update.my_chat_member is not None
    change = parse_membership(update.my_chat_member, update_id=update.update_id)
    assert change.chat_id == -1234567890123
    assert change.chat_title == "No Real Group"
    assert change.status == "administrator"
    assert change.change == "updated"  # member → administrator: present before and after


def test_missing_rights_are_taken_as_not_granted() -> None:
    update = lenient_membership(promoted())
    assert update is not None
    assert update.my_chat_member is not None
    admin = update.my_chat_member.new_chat_member
    assert isinstance(admin, ChatMemberAdministrator)
    assert admin.can_delete_messages is False
    assert admin.can_promote_members is False


def test_a_membership_update_without_a_chat_and_other_invalid_updates_stay_skipped() -> None:
    bot = Bot("123456:TEST-token")
    no_chat = copy.deepcopy(promoted())
    del no_chat["my_chat_member"]["chat"]
    bad_message = {"update_id": 900302, "message": {"message_id": 1, "date": 1, "text": "x"}}
    updates, skipped = validate_updates([no_chat, bad_message], bot)
    assert updates == []
    assert [update_id for update_id, _ in skipped] == [900301, 900302]

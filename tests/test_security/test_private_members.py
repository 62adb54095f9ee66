"""Issue 51, item 8: with an allow-list set, strangers' private chats are closed by default
(`private_chats = "members"`): a private chat is answered when its user wrote in an allowed
group or `getChatMember` confirms them in one; a stranger is told once and costs no model
call, nothing stored, and at most one `getChatMember` per allowed group per cache period."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from adapters.llm.scripted import ScriptedModel
from bot.config import SecuritySettings
from bot.domain.facts import Sender
from bot.errors import StorageUnavailable, TelegramBadRequest
from bot.services.guard import chat_allowed, membership_to_check
from bot.services.private_members import PrivateMembers
from bot.texts import text
from tests.fakes import RecordingMessenger
from tests.rig import wire_app
from tests.test_security.test_guard import GROUP, MALLORY, OTHER_GROUP, OWNER, OWNER_ID, Rig

ALICE = Sender(id=1001, name="Alice")
CAROL = Sender(id=1003, name="Carol")
REFUSED = text("en", "private_not_allowed", user_id=MALLORY.id)

# ------------------------------------------------------------------ the default and the rule


def test_members_is_the_default_with_an_allow_list_and_a_setting_always_wins() -> None:
    assert SecuritySettings().private_chats_in_effect == "allow"
    assert SecuritySettings(allowed_chats=[GROUP]).private_chats_in_effect == "members"
    explicit = SecuritySettings(allowed_chats=[GROUP], private_chats="allow")
    assert explicit.private_chats_in_effect == "allow"
    assert SecuritySettings(private_chats="members").private_chats_in_effect == "members"
    assert SecuritySettings(private_chats="owner").private_chats_in_effect == "owner"


def test_under_members_a_one_to_one_chat_waits_on_its_members_membership() -> None:
    assert membership_to_check(MALLORY.id, OWNER_ID, "members") == MALLORY.id
    assert membership_to_check(MALLORY.id, OWNER_ID, "allow") is None
    assert membership_to_check(OWNER_ID, OWNER_ID, "members") is None  # the owner: always
    assert membership_to_check(GROUP, OWNER_ID, "members") is None  # groups: the list decides
    # a channel's direct-messages chat: the member writing is the one to check
    assert membership_to_check(-100900, OWNER_ID, "members", direct_with=MALLORY.id) == MALLORY.id
    assert membership_to_check(-100900, OWNER_ID, "members", direct_with=OWNER_ID) is None
    assert chat_allowed(MALLORY.id, [GROUP], OWNER_ID, "members")  # the gate asks on
    assert not chat_allowed(OTHER_GROUP, [GROUP], OWNER_ID, "members")


# ------------------------------------------------------------------ the membership check


class Seen:
    def __init__(self, members: set[int], *, down: bool = False) -> None:
        self.members = members
        self.down = down
        self.asked: list[tuple[int, tuple[int, ...]]] = []

    async def seen_in_groups(self, user_id: int, chat_ids: Sequence[int]) -> bool:
        self.asked.append((user_id, tuple(chat_ids)))
        if self.down:
            raise StorageUnavailable("database is away")
        return user_id in self.members


class Platform:
    """`getChatMember` over a table of (group, user) pairs; counts its calls."""

    def __init__(self, members: set[tuple[int, int]], *, gate: asyncio.Event | None = None):
        self.members = members
        self.calls: list[tuple[int, int]] = []
        self.gate = gate

    async def is_chat_member(self, chat_id: int, user_id: int) -> bool:
        self.calls.append((chat_id, user_id))
        if self.gate is not None:
            await self.gate.wait()
        if chat_id == -404:
            raise TelegramBadRequest("Bad Request: chat not found")
        return (chat_id, user_id) in self.members


class Ticking:
    def __init__(self) -> None:
        self.at = 0.0

    def __call__(self) -> float:
        return self.at


async def test_seen_in_a_group_is_enough_and_asks_telegram_nothing() -> None:
    platform = Platform(set())
    members = PrivateMembers(groups=[GROUP, OTHER_GROUP], seen=Seen({ALICE.id}), platform=platform)
    assert await members.is_member(ALICE.id)
    assert platform.calls == []


async def test_getchatmember_confirms_a_member_of_any_allowed_group() -> None:
    platform = Platform({(OTHER_GROUP, CAROL.id)})
    members = PrivateMembers(
        groups=[-404, GROUP, OTHER_GROUP, CAROL.id], seen=Seen(set()), platform=platform
    )
    assert await members.is_member(CAROL.id)  # a failed lookup (-404) is a "no" for that group
    # the user id in the allow-list is no group to ask about
    assert platform.calls == [(-404, CAROL.id), (GROUP, CAROL.id), (OTHER_GROUP, CAROL.id)]


async def test_a_stranger_costs_one_lookup_per_group_per_cache_period() -> None:
    clock = Ticking()
    seen = Seen(set())
    platform = Platform(set())
    members = PrivateMembers(
        groups=[GROUP, OTHER_GROUP], seen=seen, platform=platform, ttl=600, now=clock
    )
    for _ in range(100):
        assert not await members.is_member(MALLORY.id)
    assert len(platform.calls) == 2
    assert len(seen.asked) == 1
    clock.at = 599
    assert not await members.is_member(MALLORY.id)
    assert len(platform.calls) == 2
    clock.at = 601  # the period is over: asked again (they may have joined since)
    assert not await members.is_member(MALLORY.id)
    assert len(platform.calls) == 4


async def test_a_burst_at_once_shares_one_lookup() -> None:
    gate = asyncio.Event()
    platform = Platform(set(), gate=gate)
    members = PrivateMembers(groups=[GROUP], seen=None, platform=platform)
    asking = [asyncio.create_task(members.is_member(MALLORY.id)) for _ in range(20)]
    await asyncio.sleep(0)
    gate.set()
    assert await asyncio.gather(*asking) == [False] * 20
    assert platform.calls == [(GROUP, MALLORY.id)]


async def test_the_cache_is_bounded_the_oldest_going_first() -> None:
    platform = Platform(set())
    members = PrivateMembers(groups=[GROUP], seen=None, platform=platform, max_entries=2)
    for user in (1, 2, 3):
        await members.is_member(user)
    await members.is_member(3)
    await members.is_member(2)
    assert len(platform.calls) == 3
    await members.is_member(1)  # forgotten: asked again
    assert len(platform.calls) == 4


async def test_a_no_the_store_could_not_back_is_not_kept() -> None:
    seen = Seen({ALICE.id}, down=True)
    members = PrivateMembers(groups=[GROUP], seen=seen, platform=None)
    assert not await members.is_member(ALICE.id)
    seen.down = False
    assert await members.is_member(ALICE.id)


async def test_writing_in_an_allowed_group_lets_a_refused_user_in_at_once() -> None:
    platform = Platform(set())
    members = PrivateMembers(groups=[GROUP], seen=Seen(set()), platform=platform)
    assert not await members.is_member(ALICE.id)
    members.saw(OTHER_GROUP, ALICE.id)  # not an allowed group
    assert not await members.is_member(ALICE.id)
    members.saw(GROUP, ALICE.id)
    assert await members.is_member(ALICE.id)
    assert len(platform.calls) == 1


# ------------------------------------------------------------------ through the inbound path


class MemberMessenger(RecordingMessenger):
    """A messenger that can ask `getChatMember` (as the Telegram adapter can)."""

    def __init__(self, members: set[tuple[int, int]]) -> None:
        super().__init__()
        self.members = members
        self.member_calls: list[tuple[int, int]] = []

    async def is_chat_member(self, chat_id: int, user_id: int) -> bool:
        self.member_calls.append((chat_id, user_id))
        return (chat_id, user_id) in self.members


def private(sender: Sender) -> dict[str, object]:
    return {"sender": sender, "chat_id": sender.id, "chat_type": "private"}


async def test_a_strangers_private_chat_is_refused_once_and_stores_nothing(
    tmp_path: Path,
) -> None:
    rig = Rig(tmp_path, security={"allowed_chats": [GROUP]})  # private_chats unset
    assert await rig.send("hello?", **private(MALLORY)) == [REFUSED]
    assert await rig.send("anyone there?", **private(MALLORY)) == []
    assert await rig.store.list_sessions() == ()
    assert await rig.store.find_platform_message(MALLORY.id, rig.next_id) is None
    assert isinstance(rig.model, ScriptedModel)
    assert rig.model.requests == []
    assert await rig.send("still me", **private(OWNER)) == ["Noted: still me"]


async def test_a_member_seen_in_the_allowed_group_is_answered_in_private(tmp_path: Path) -> None:
    rig = Rig(tmp_path, security={"allowed_chats": [GROUP]})
    await rig.send("morning all", sender=ALICE)  # in the group, not addressed
    assert await rig.send("a question", **private(ALICE)) == ["Noted: a question"]
    await rig.send("morning", sender=MALLORY, chat_id=OTHER_GROUP)  # a group not allowed
    assert await rig.send("me too?", **private(MALLORY)) == [REFUSED]


async def test_a_member_telegram_confirms_is_answered_in_private(tmp_path: Path) -> None:
    rig = Rig(tmp_path, security={"allowed_chats": [GROUP]})
    messenger = MemberMessenger({(GROUP, CAROL.id)})
    rig.messenger = messenger
    rig.app = wire_app(
        rig.settings, store=rig.store, messenger=messenger, clock=rig.clock, model=rig.model,  # type: ignore[arg-type]
    )  # fmt: skip
    assert await rig.send("hi, I lurk", **private(CAROL)) == ["Noted: hi, I lurk"]
    for _ in range(5):
        await rig.send("let me in", **private(MALLORY))
    assert messenger.member_calls == [(GROUP, CAROL.id), (GROUP, MALLORY.id)]


async def test_a_set_policy_wins_over_the_default(tmp_path: Path) -> None:
    rig = Rig(tmp_path, security={"allowed_chats": [GROUP], "private_chats": "allow"})
    assert await rig.send("hello?", **private(MALLORY)) == ["Noted: hello?"]


@pytest.mark.parametrize("policy", ["owner", "allow_list"])
async def test_other_policies_ask_telegram_nothing(tmp_path: Path, policy: str) -> None:
    rig = Rig(tmp_path, security={"allowed_chats": [GROUP], "private_chats": policy})
    messenger = MemberMessenger({(GROUP, MALLORY.id)})
    rig.messenger = messenger
    rig.app = wire_app(
        rig.settings, store=rig.store, messenger=messenger, clock=rig.clock, model=rig.model,  # type: ignore[arg-type]
    )  # fmt: skip
    assert await rig.send("hello?", **private(MALLORY)) == [REFUSED]
    assert messenger.member_calls == []


async def test_writing_in_a_channels_direct_messages_makes_no_member(tmp_path: Path) -> None:
    direct = -1003330051  # a channel's direct-messages chat: one-to-one, despite its id
    rig = Rig(tmp_path, security={"allowed_chats": [GROUP, direct]})
    dm = {"chat_id": direct, "direct_messages": True, "mentions_bot": True}
    assert await rig.send("@Helper hi", **dm) == []
    assert await rig.send("@Helper hi again", **dm) == []
    assert isinstance(rig.model, ScriptedModel)
    assert rig.model.requests == []
    assert await rig.send("@Helper hi", sender=OWNER, **dm) == ["Noted: @Helper hi"]

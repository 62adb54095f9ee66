"""Spend limits inside the app (`bot.agent.spend`): a turn that reaches a limit finishes its
current call and answers with the notice instead of starting the next; summaries count
toward the bot-wide budgets only and are never refused; the owner is exempt unless
`owner_exempt = false`; a chat id's override wins over its scene's; and the arithmetic
(billable-equivalent tokens, a call's bound, days and months in the bot's zone)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from adapters.llm.scripted import ScriptedModel
from bot.agent.ledger_read import read_entries
from bot.agent.routes import Prices
from bot.agent.spend import SpendGuard, SpendPolicy, billable_tokens, call_bound, periods_at
from bot.agent.spend_counters import (
    Amount,
    Change,
    Counter,
    Limit,
    LocalSpendCounters,
    describe_amount,
)
from bot.config import load_settings
from bot.domain.facts import Sender
from bot.domain.ids import SessionKey
from bot.domain.messages import CachePlan, ChatMessage, ToolCall
from bot.domain.records import UserRecord
from bot.errors import ConfigError
from bot.ports import LLMRequest, LLMResponse, NewRecord, Usage
from bot.services.inbound_rules import BotIdentity
from bot.texts import text
from testkit.memory_store import InMemoryStore
from tests.fakes import RecordingMessenger, SteppingClock
from tests.rig import BOT_ID, rig_settings, wire_app
from tests.test_agent.rig import CHAT, ROUTE, make_app, model_call, say

ALICE = Sender(id=1001, name="Alice")
OWNER = Sender(id=42, name="Olga")


def thousand(request: LLMRequest) -> LLMResponse:
    """A search each call, 1,000 tokens each; the answer once a result came back twice."""
    results = sum(1 for m in request.messages if m.role == "tool")
    usage = Usage(input_tokens=1_000, output_tokens=0)
    if results >= 2:
        return LLMResponse(text="found it", usage=usage)
    call = ToolCall(id=f"c{results}", name="search_history", arguments='{"query":"plans"}')
    return LLMResponse(tool_calls=(call,), usage=usage)


async def test_a_turn_that_reaches_the_limit_ends_with_the_notice_before_its_next_call(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(default=thousand)
    messenger = RecordingMessenger()
    app, _store, clock = make_app(tmp_path, model, messenger, limits={"member_daily_tokens": 1_500})
    await say(app, clock, 1, "@Helper what were the plans?", sender=ALICE, mentions_bot=True)
    # the first call (1,000) left room; the second crossed 1,500 and ran to its end; the
    # third was never sent, and the member heard the notice instead of an answer
    assert len(model.requests) == 2
    notice = text("en", "spend_member_limit", reset="00:00 UTC")
    assert messenger.texts(CHAT) == [notice]
    entries = list(read_entries(tmp_path / "agent-traces"))
    assert [e.refused for e in entries] == [None, None, "budget"]
    assert entries[-1].error is not None
    assert entries[-1].error.startswith("BudgetExceeded")
    # one notice a period: the next message is refused in silence
    await say(app, clock, 2, "@Helper hello?", sender=ALICE, mentions_bot=True)
    assert messenger.texts(CHAT) == [notice]
    assert len(model.requests) == 2


@pytest.mark.parametrize(
    ("exempt", "answered"), [(True, 3), (False, 1)], ids=["exempt", "not-exempt"]
)
async def test_the_owner_is_exempt_unless_told_otherwise(
    tmp_path: Path, exempt: bool, answered: int
) -> None:
    model = ScriptedModel(
        default=lambda _r: LLMResponse(text="ok", usage=Usage(input_tokens=1_000, output_tokens=0))
    )
    messenger = RecordingMessenger()
    app, _store, clock = make_app(
        tmp_path, model, messenger, limits={"daily_tokens": 500, "owner_exempt": exempt}
    )
    for n in range(3):
        await say(app, clock, n + 1, f"@Helper {n}", sender=OWNER, mentions_bot=True)
    assert len(model.requests) == answered
    assert messenger.texts(CHAT).count("ok") == answered


async def test_a_chat_ids_override_wins_over_its_scene(tmp_path: Path) -> None:
    model = ScriptedModel(
        default=lambda _r: LLMResponse(text="ok", usage=Usage(input_tokens=1_000, output_tokens=0))
    )
    messenger = RecordingMessenger()
    limits = {
        "chat_daily_tokens": 1_000,
        "group": {"chat_daily_tokens": 2_000},
        "chats": {str(CHAT): {"chat_daily_tokens": 3_000}},
    }
    app, _store, clock = make_app(tmp_path, model, messenger, limits=limits)
    for n in range(5):
        await say(app, clock, n + 1, f"@Helper {n}", sender=ALICE, mentions_bot=True)
    assert len(model.requests) == 3
    assert messenger.texts(CHAT)[3] == text("en", "spend_chat_limit", reset="00:00 UTC")


async def test_summaries_count_toward_the_bot_only_and_are_never_refused() -> None:
    counters = LocalSpendCounters()
    guard = SpendGuard(
        policy=SpendPolicy(daily=Limit(cost=1), zone=UTC),
        counters=counters,
        messenger=RecordingMessenger(),
        clock=_Fixed(),
    )
    await guard.on_model_call(model_call(purpose="compaction"))
    day = periods_at(datetime(2026, 11, 30, 6, 0, tzinfo=UTC), UTC)
    # 1,000,000 input (half cached) and 1,000 output at 2.0 / 0.5 / 8.0 per million
    cost = round((500_000 * 2.0 + 500_000 * 0.5 + 1_000 * 8.0) / 1_000_000 * 1e9)
    assert counters.spent == {
        Counter("day", day.day): Amount(cost, 500_000 + 125_000 + 1_000),
        Counter("month", day.month): Amount(cost, 500_000 + 125_000 + 1_000),
    }
    # a turn's call that was never sent (no hold opened for it) counts nothing
    await guard.on_model_call(model_call())
    assert sum(a.cost for a in counters.spent.values()) == 2 * cost


class _Fixed:
    def now(self) -> datetime:
        return datetime(2026, 11, 30, 6, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("usage", "tokens"),
    [
        (Usage(input_tokens=1_000, output_tokens=10), 1_010),
        (Usage(input_tokens=1_000, output_tokens=0, cached_tokens=800), 200 + 200),
        (Usage(input_tokens=1_000, output_tokens=0, cache_write_tokens=400), 600 + 500),
        (Usage(input_tokens=3, output_tokens=0, cached_tokens=1), 2 + 1),  # a quarter rounds up
    ],
    ids=["plain", "reads", "writes", "round-up"],
)
def test_billable_equivalent_tokens(usage: Usage, tokens: int) -> None:
    assert billable_tokens(usage) == tokens


def test_a_calls_bound_prices_its_input_at_the_dearer_of_input_and_write() -> None:
    prices = Prices(input_per_mtok=3.0, cache_write_per_mtok=3.75, output_per_mtok=15.0)
    request = LLMRequest(
        model="m",
        messages=(ChatMessage(role="user", content="hi"),),
        max_output_tokens=1_000,
        cache_plan=CachePlan(system_end=0),
    )
    bound = call_bound(prices, request, input_tokens=10_000, output_bound=8_192)
    assert bound == Amount(round((10_000 * 3.75 + 1_000 * 15.0) / 1e6 * 1e9), 12_500 + 1_000)
    unpriced = call_bound(Prices(), request, input_tokens=10_000, output_bound=8_192)
    assert unpriced == Amount(0, 12_500 + 1_000)
    assert ROUTE.prices.configured


def test_days_and_months_are_the_bots_zone() -> None:
    zone = ZoneInfo("Asia/Shanghai")
    # 2026-12-31 17:30 UTC is already 2027-01-01 01:30 in Shanghai
    periods = periods_at(datetime(2026, 12, 31, 17, 30, tzinfo=UTC), zone)
    assert (periods.day, periods.month) == ("2027-01-01", "2027-01")
    assert periods.day_ends == datetime(2027, 1, 2, tzinfo=zone)
    assert periods.month_ends == datetime(2027, 2, 1, tzinfo=zone)
    december = periods_at(datetime(2026, 12, 15, tzinfo=UTC), UTC)
    assert december.month_ends == datetime(2027, 1, 1, tzinfo=UTC)


def test_amounts_are_described_by_the_parts_a_limit_sets() -> None:
    used = Amount(31_200_000, 12_400)
    assert describe_amount(used, Limit(cost=50_000_000), "USD") == "0.0312 / 0.0500 USD"
    assert describe_amount(used, Limit(tokens=50_000), "USD") == "12,400 / 50,000 tokens"
    assert describe_amount(used, Limit(), "EUR") == "0.0312 EUR, 12,400 tokens"


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"daily_cost_tokens": 5}, "limits.daily_cost_tokens: unknown key"),
        ({"chats": {"the-group": {"chat_daily_cost": 1.0}}}, "expected a chat id"),
        ({"member_daily_cost": -1}, "limits.member_daily_cost"),
        ({"chats": {"-100": {"member_daily_tokenz": 1}}}, "did you mean"),
    ],
    ids=["unknown-key", "chat-id", "negative", "override-key"],
)
def test_bad_limits_are_refused_with_the_setting_named(
    tmp_path: Path, limits: dict[str, object], message: str
) -> None:
    config = tmp_path / "bot.toml"
    config.write_text(_toml(limits), encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_settings(config)


def _toml(limits: dict[str, object]) -> str:
    lines = ["[limits]"]
    tables = []
    for key, value in limits.items():
        if isinstance(value, dict):
            for chat, inner in value.items():
                assert isinstance(inner, dict)
                body = "\n".join(f"{k} = {v}" for k, v in inner.items())
                tables.append(f'[limits.{key}."{chat}"]\n{body}')
        else:
            lines.append(f"{key} = {value}")
    return "\n".join(lines) + "\n" + "\n".join(tables) + "\n"


@pytest.mark.parametrize(("spent", "told"), [(1_000, []), (0, ["missed"])], ids=["spent", "not"])
async def test_a_restart_does_not_call_a_message_the_budget_refused_missed(
    tmp_path: Path, spent: int, told: list[str]
) -> None:
    messenger = RecordingMessenger()
    store = InMemoryStore()
    clock = SteppingClock(datetime(2026, 11, 30, 12, 0, tzinfo=UTC))
    settings = rig_settings(tmp_path, owner_id=42, limits={"member_daily_tokens": 1_000})
    app = wire_app(settings, store=store, messenger=messenger, model=ScriptedModel(), clock=clock)
    assert app.spend is not None
    day = periods_at(clock.now(), UTC).day
    await app.spend.counters.settle(
        [Change(Counter("member", day, -100, ALICE.id), spent=Amount(0, spent))]
    )
    session = await store.open_session(SessionKey(chat_id=-100), scene="group")
    body = UserRecord(sender=ALICE, text="hey @Helper_Bot?")
    at = clock.now() - timedelta(hours=1)  # too late to answer: once, "missed" was said
    await store.append(session.id, [NewRecord(body=body, created_at=at, message_ids=(7,))])
    await app.recovery.recover(BotIdentity(id=BOT_ID, username="helper_bot"))
    missed = text("en", "restarted_missed")
    assert ["missed" for t in messenger.texts(-100) if t == missed] == told

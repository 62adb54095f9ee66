"""Spend limits: what a model call may cost before it is made, who is over a budget, and
who is told (README, Spend limits; docs/architecture.md, Spend limits).

Four budgets, each a cost (in the ledger's currency) and/or a number of billable-equivalent
tokens: the whole bot per day and per month, each chat per day, each member of a chat per
day; days and months in the bot's time zone. `SpendGuard` is the one place they are
enforced:

- `before_call`, right before the provider is called, bounds the call from its request
  (input as counted for the capacity check, the route's prices with a cache write priced
  where writes are billed, the output limit) and asks the counters to hold that bound on
  every limited budget, all or none, only while each budget is below its limit counting what
  is already held by calls in flight. A budget that has reached its limit refuses the call
  (`BudgetExceeded`): the call that crosses a limit runs to its end, the next does not
  start, so a limit is passed by at most one call, on one worker or on many.
- `on_model_call` (an `EventBus` subscriber, like the ledger) releases the hold and counts
  what the call really cost: `Prices.cost` of the reported usage, the ledger line's `cost`,
  and its billable-equivalent tokens. Summary (compaction) calls are the operator's: never
  refused, counted toward the bot-wide budgets only.
- A refused member, chat or (for a bot-wide budget) chat is told once per period, then the
  turn ends in silence; the owner hears at 80 % and at 100 % of each bot-wide budget, once.

Money is counted in integer billionths (`NANOS`), so sums and limits compare exactly.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, tzinfo
from datetime import time as day_time

from bot.agent.events import EventBus, ModelCalled
from bot.agent.routes import Prices
from bot.agent.spend_counters import (
    NANOS,
    ZERO,
    Amount,
    Change,
    Counter,
    Limit,
    SpendCounters,
    describe_amount,
    nanos,
)
from bot.agent.turn import TurnState
from bot.context.window import PerScene
from bot.domain.ids import Locale, Scene
from bot.errors import BudgetExceeded, StorageUnavailable, TelegramError
from bot.ports import Clock, LLMRequest, Messenger, Usage
from bot.texts import text

log = logging.getLogger("tgbot.spend")

DEFAULT_OUTPUT_BOUND = 8_192
"""The output a call is bounded by when the runtime sets no `max_output_tokens`."""
WARN_SHARE = 0.8
HOLD_POLL_SECONDS = 0.1
"""How often a call waiting for calls in flight looks again."""
STALE_HOLD_SECONDS = 3_600.0
"""A hold whose call never reported (its turn was cancelled) is released after this long."""
SWEEP_EVERY = 1_024
"""Every this many counted calls, periods before last month are forgotten."""

# ---------------------------------------------------------------- the policy


@dataclass(frozen=True, slots=True)
class ChatLimits:
    """A chat's own daily limit and each of its members' daily limit."""

    chat: Limit = field(default_factory=Limit)
    member: Limit = field(default_factory=Limit)


NO_CHAT_LIMITS = PerScene(group=ChatLimits(), private=ChatLimits(), owner=ChatLimits())


@dataclass(frozen=True, slots=True, kw_only=True)
class SpendPolicy:
    """The limits from `[limits]`, resolved: per scene, with per-chat-id overrides."""

    daily: Limit = field(default_factory=Limit)
    monthly: Limit = field(default_factory=Limit)
    scenes: PerScene[ChatLimits] = NO_CHAT_LIMITS
    chats: Mapping[int, ChatLimits] = field(default_factory=dict)
    owner_id: int | None = None
    owner_exempt: bool = True
    zone: tzinfo
    zone_name: str = "UTC"
    locale: Locale = "zh"
    chat_locale: Callable[[int], Locale] | None = None
    """A chat's language (`BOT_LOCALE=auto`: its sticky language); None: `locale`."""
    currency: str = "USD"
    output_bound: int = DEFAULT_OUTPUT_BOUND
    hold_wait_seconds: float = 180.0
    """The longest a call waits for calls in flight to report (the model call deadline)."""

    def locale_of(self, chat_id: int) -> Locale:
        return self.chat_locale(chat_id) if self.chat_locale is not None else self.locale

    def for_chat(self, chat_id: int, scene: Scene) -> ChatLimits:
        return self.chats.get(chat_id) or self.scenes.of(scene)

    @property
    def active(self) -> bool:
        """Whether any limit is set (else nothing is counted: no guard is wired)."""
        chats = (*self.chats.values(), self.scenes.group, self.scenes.private, self.scenes.owner)
        return (
            self.daily.set
            or self.monthly.set
            or any(limits.chat.set or limits.member.set for limits in chats)
        )

    def exempt(self, user_id: int | None) -> bool:
        return self.owner_exempt and self.owner_id is not None and user_id == self.owner_id

    def limit_of(self, counter: Counter, scene: Scene = "group") -> Limit:
        match counter.scope:
            case "day":
                return self.daily
            case "month":
                return self.monthly
            case "chat":
                return self.for_chat(counter.chat_id, scene).chat
            case "member":
                return self.for_chat(counter.chat_id, scene).member


@dataclass(frozen=True, slots=True)
class Periods:
    """The day and month a moment falls in (the bot's zone), and when each ends."""

    day: str
    month: str
    day_ends: datetime
    month_ends: datetime


def periods_at(now: datetime, zone: tzinfo) -> Periods:
    local = now.astimezone(zone)
    today = local.date()
    tomorrow = today + timedelta(days=1)
    first_next = date(today.year + today.month // 12, today.month % 12 + 1, 1)
    return Periods(
        day=today.isoformat(),
        month=today.isoformat()[:7],
        day_ends=datetime.combine(tomorrow, day_time(), tzinfo=zone),
        month_ends=datetime.combine(first_next, day_time(), tzinfo=zone),
    )


def billable_tokens(usage: Usage) -> int:
    """Billable-equivalent tokens of a call: uncached input + 0.25 × cache reads + 1.25 ×
    cache writes + output (rounded up)."""
    total = max(0, usage.input_tokens)
    cached = max(0, min(usage.cached_tokens, total))
    writes = max(0, min(usage.cache_write_tokens, total - cached))
    uncached = total - cached - writes
    quarters = 4 * uncached + cached + 5 * writes + 4 * max(0, usage.output_tokens)
    return -(-quarters // 4)


def spent_by(usage: Usage | None, prices: Prices) -> Amount:
    """What a call cost: its ledger cost (priced routes) and billable-equivalent tokens."""
    if usage is None:
        return ZERO
    cost = nanos(prices.cost(usage)) if prices.configured else 0
    return Amount(cost, billable_tokens(usage))


def call_bound(
    prices: Prices, request: LLMRequest, *, input_tokens: int, output_bound: int
) -> Amount:
    """The most a call may cost, from its request: every input token at the dearer of the
    input and cache-write prices (a breakpoint may write it), the output limit at the output
    price; tokens the same way (a write weighs 1.25)."""
    output = request.max_output_tokens or output_bound
    writes = request.cache_plan is not None or prices.cache_write_per_mtok > 0
    per_input = max(prices.input_per_mtok, prices.cache_write_per_mtok)
    cost = nanos((input_tokens * per_input + output * prices.output_per_mtok) / 1_000_000)
    tokens = (5 * input_tokens + 3) // 4 if writes else input_tokens
    return Amount(cost if prices.configured else 0, tokens + output)


# ---------------------------------------------------------------- the guard


@dataclass(frozen=True, slots=True)
class _Open:
    """A call in flight: the counters it is charged to, and what it holds on which."""

    counters: tuple[Counter, ...]
    held: frozenset[Counter]
    bound: Amount
    opened: float


class SpendGuard:
    """Enforces `SpendPolicy` before each model call and counts each call after it (see the
    module docstring). Implements `bot.agent.provider_call.SpendCheck`."""

    def __init__(
        self,
        *,
        policy: SpendPolicy,
        counters: SpendCounters,
        messenger: Messenger,
        clock: Clock,
    ) -> None:
        self.policy = policy
        self.counters = counters
        self.messenger = messenger
        self.clock = clock
        self._open: dict[tuple[int, str], _Open] = {}
        self._settled = 0

    def attach(self, bus: EventBus) -> SpendGuard:
        bus.on(ModelCalled, self.on_model_call)
        return self

    def counters_of(
        self, chat_id: int, user_id: int | None, periods: Periods
    ) -> tuple[Counter, ...]:
        """The budgets a turn's call in `chat_id` asked by `user_id` is charged to."""
        member = (Counter("member", periods.day, chat_id, user_id),) if user_id is not None else ()
        return (
            *member,
            Counter("chat", periods.day, chat_id),
            Counter("day", periods.day),
            Counter("month", periods.month),
        )

    async def before_call(
        self,
        state: TurnState,
        request: LLMRequest,
        *,
        input_tokens: int,
        prices: Prices | None = None,
    ) -> None:
        """Hold the call's bound on every limited budget, or raise `BudgetExceeded`;
        `prices`: the route that takes the call (a fallback's), else the turn's route."""
        await self._release_stale()
        session = state.window.session
        key = (session.id, state.turn_id)
        stale = self._open.pop(key, None)
        if stale is not None:  # a call of this turn that never reported
            await self._settle(stale, ZERO)
        periods = periods_at(self.clock.now(), self.policy.zone)
        chat_id = session.key.chat_id
        counters = self.counters_of(chat_id, state.requester, periods)
        bound = call_bound(
            prices if prices is not None else state.window.route.prices,
            request,
            input_tokens=input_tokens,
            output_bound=self.policy.output_bound,
        )
        changes = []
        if not self.policy.exempt(state.requester):
            for counter in counters:
                limit = self.policy.limit_of(counter, session.scene)
                if limit.set:
                    changes.append(Change(counter, held=bound, limit=limit))
        if changes:
            try:
                over = await self._hold(changes)
            except StorageUnavailable:  # the database is the bot's too: let the call go
                log.warning("spend limits not checked: the counters are unavailable")
                over, changes = None, []
            if over is not None:
                notice = await self._notice(over, chat_id, periods)
                log.info(
                    "refused a model call in chat %s: the %s budget is spent", chat_id, over.scope
                )
                raise BudgetExceeded(
                    over.scope, f"the {_budget_name(over)} is spent", notice=notice
                )
        self._open[key] = _Open(
            counters=counters,
            held=frozenset(c.counter for c in changes),
            bound=bound,
            opened=time.monotonic(),
        )

    async def hold_cost(
        self, chat_id: int, scene: Scene, user_id: int | None, bound: float
    ) -> _Open:
        """Hold `bound` (money: a call that is not a model's, a transcription) on every
        limited budget `user_id` in `chat_id` is charged to, as `before_call` does, or raise
        `BudgetExceeded` (no notice: the member's message is stored without the work);
        `settle_cost` counts what it really cost."""
        periods = periods_at(self.clock.now(), self.policy.zone)
        counters = self.counters_of(chat_id, user_id, periods)
        amount = Amount(nanos(bound))
        changes = []
        if not self.policy.exempt(user_id):
            for counter in counters:
                limit = self.policy.limit_of(counter, scene)
                if limit.set:
                    changes.append(Change(counter, held=amount, limit=limit))
        if changes:
            over = await self._hold(changes)
            if over is not None:
                raise BudgetExceeded(over.scope, f"the {_budget_name(over)} is spent")
        held = frozenset(c.counter for c in changes)
        return _Open(counters=counters, held=held, bound=amount, opened=time.monotonic())

    async def settle_cost(self, held: _Open, cost: float) -> None:
        """Release what `hold_cost` held and count `cost`."""
        await self._settle(held, Amount(nanos(cost)))

    async def _hold(self, changes: list[Change]) -> Counter | None:
        """Hold `changes`; the budget that is spent, or None once held. A budget reached only
        by what calls in flight hold is not spent: the call waits for them to report (their
        real cost is usually far below their bound). After `hold_wait_seconds` (the longest
        a call may take) the holds still there belong to calls that never reported (a
        killed worker's), and the call goes ahead without holding anything."""
        give_up = time.monotonic() + self.policy.hold_wait_seconds
        while True:
            over = await self.counters.hold(changes)
            if over is None:
                return None
            limit = next(c.limit for c in changes if c.counter == over)
            spent = (await self.counters.totals([over]))[over]
            if limit.reached(spent):
                return over
            if time.monotonic() >= give_up:
                log.warning("the %s is held by calls that never reported", _budget_name(over))
                changes.clear()
                return None
            await asyncio.sleep(HOLD_POLL_SECONDS)

    async def spent_for(self, chat_id: int, scene: Scene, user_id: int | None) -> bool:
        """Whether a turn asked by `user_id` in `chat_id` would be refused now (a budget it
        is charged to has reached its limit): then a missed message is not worth a notice."""
        if self.policy.exempt(user_id):
            return False
        periods = periods_at(self.clock.now(), self.policy.zone)
        limited = {
            counter: limit
            for counter in self.counters_of(chat_id, user_id, periods)
            if (limit := self.policy.limit_of(counter, scene)).set
        }
        if not limited:
            return False
        totals = await self.counters.totals(list(limited))
        return any(limit.reached(totals[c]) for c, limit in limited.items())

    async def report(self) -> str:
        """`/budget`: spent, limits and resets of the bot's budgets, the limits of chats
        and members, and today's top chats and members by cost."""
        status = await spend_status(self.policy, self.counters, self.clock.now())
        return render_status(self.policy, status)

    async def on_model_call(self, call: ModelCalled) -> None:
        spent = spent_by(call.usage, call.route.prices)
        if call.purpose == "compaction":  # the operator's: the bot-wide budgets only
            periods = periods_at(call.at, self.policy.zone)
            bot = (Counter("day", periods.day), Counter("month", periods.month))
            await self._settle(_Open(bot, frozenset(), ZERO, 0.0), spent)
            return
        if call.purpose in ("judge", "catchup"):  # the chat's: its budget and the bot's
            periods = periods_at(call.at, self.policy.zone)
            chat = self.counters_of(call.session.key.chat_id, None, periods)
            await self._settle(_Open(chat, frozenset(), ZERO, 0.0), spent)
            return
        opened = self._open.pop((call.session.id, call.turn_id), None)
        if opened is not None:  # else the call was never sent (capacity, refused)
            await self._settle(opened, spent)

    async def _settle(self, opened: _Open, spent: Amount) -> None:
        if spent == ZERO and not opened.held:
            return
        changes = [
            Change(c, spent=spent, held=-opened.bound if c in opened.held else ZERO)
            for c in opened.counters
        ]
        totals = await self.counters.settle(changes)
        self._settled += 1
        if self._settled % SWEEP_EVERY == 0:  # keep this month and the last, for `/budget`
            await self.counters.forget_before(_previous_month(opened.counters[-1].period))
        for counter in opened.counters:
            if counter.scope in ("day", "month") and counter in totals:
                await self._warn_owner(counter, totals[counter])

    async def _release_stale(self) -> None:
        now = time.monotonic()
        stale = [k for k, o in self._open.items() if now - o.opened > STALE_HOLD_SECONDS]
        for key in stale:
            await self._settle(self._open.pop(key), ZERO)

    async def _notice(self, over: Counter, chat_id: int, periods: Periods) -> str | None:
        """The text a refused chat is told, or None when it was told this period."""
        if over.scope in ("day", "month"):  # each chat hears once about the bot's budget
            claim = Counter(over.scope, over.period, chat_id)
            if not await self.counters.claim_notice("bot_refused", claim):
                return None
        elif not await self.counters.claim_notice("refused", over):
            return None
        locale = self.policy.locale_of(chat_id)
        if over.scope == "month":
            return text(locale, "spend_month_limit", reset=periods.month_ends.date().isoformat())
        reset = f"00:00 {self.policy.zone_name}"
        return text(locale, f"spend_{over.scope}_limit", reset=reset)

    async def _warn_owner(self, counter: Counter, total: Amount) -> None:
        owner = self.policy.owner_id
        limit = self.policy.limit_of(counter)
        if owner is None or not limit.set:
            return
        share = limit.share(total)
        if share < WARN_SHARE:
            return
        kind = "owner_100" if share >= 1 else "owner_80"
        if not await self.counters.claim_notice(kind, counter):
            return
        locale = self.policy.locale_of(owner)  # the owner's private chat
        body = text(
            locale,
            "spend_owner_reached" if share >= 1 else "spend_owner_warning",
            budget=text(locale, f"spend_name_{counter.scope}", period=counter.period),
            share=f"{share:.0%}",
            spent=describe_amount(total, limit, self.policy.currency),
        )
        try:
            await self.messenger.send_text(owner, body)
        except TelegramError as exc:
            log.warning("could not tell the owner about the %s: %s", _budget_name(counter), exc)


TOP = 5
"""Chats and members `/budget` lists."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SpendStatus:
    """The bot's budgets now: what the day and the month spent, today's top spenders."""

    periods: Periods
    day: Amount
    month: Amount
    chats: tuple[tuple[Counter, Amount], ...] = ()
    members: tuple[tuple[Counter, Amount], ...] = ()


async def spend_status(policy: SpendPolicy, counters: SpendCounters, now: datetime) -> SpendStatus:
    """The bot's budgets at `now` (`/budget`, the dashboard, `/metrics`)."""
    periods = periods_at(now, policy.zone)
    day, month = Counter("day", periods.day), Counter("month", periods.month)
    totals = await counters.totals([day, month])
    return SpendStatus(
        periods=periods,
        day=totals[day],
        month=totals[month],
        chats=tuple(await counters.top("chat", periods.day, TOP)),
        members=tuple(await counters.top("member", periods.day, TOP)),
    )


def render_status(policy: SpendPolicy, status: SpendStatus) -> str:
    """The `/budget` text (the owner's, in English like `/context`)."""
    currency, periods = policy.currency, status.periods
    zone = policy.zone_name

    def line(name: str, used: Amount, limit: Limit, resets: str) -> str:
        share = f" ({limit.share(used):.0%})" if limit.set else " (no limit)"
        return f"{name}: {describe_amount(used, limit, currency)}{share}, resets {resets}"

    def limit_text(limit: Limit) -> str:
        return _limit_only(limit, currency) if limit.set else "none"

    lines = [
        f"Budgets on {periods.day} ({zone})",
        line("today", status.day, policy.daily, f"00:00 {zone}"),
        line(
            f"this month ({periods.month})",
            status.month,
            policy.monthly,
            periods.month_ends.date().isoformat(),
        ),
    ]
    scenes: tuple[Scene, ...] = ("group", "private", "owner")
    for scene in scenes:
        limits = policy.scenes.of(scene)
        lines.append(
            f"{scene} chats: {limit_text(limits.chat)} a day each, "
            f"members {limit_text(limits.member)} a day each"
        )
    if policy.chats:
        lines.append(f"chats with their own limits: {len(policy.chats)}")
    lines.append(
        "the owner is exempt" if policy.exempt(policy.owner_id) else "the owner is not exempt"
    )
    if status.chats:
        lines.append("top chats today:")
        lines += [
            f"  {c.chat_id}: {describe_amount(a, Limit(), currency)}" for c, a in status.chats
        ]
    if status.members:
        lines.append("top members today:")
        lines += [
            f"  {c.user_id} in {c.chat_id}: {describe_amount(a, Limit(), currency)}"
            for c, a in status.members
        ]
    return "\n".join(lines)


def _limit_only(limit: Limit, currency: str) -> str:
    parts = []
    if limit.cost > 0:
        parts.append(f"{limit.cost / NANOS:.4f} {currency}")
    if limit.tokens > 0:
        parts.append(f"{limit.tokens:,} tokens")
    return " or ".join(parts)


def _previous_month(period: str) -> str:
    """`2027-01` → `2026-12` (of a month or a day period)."""
    year, month = int(period[:4]), int(period[5:7])
    return f"{year - 1}-12" if month == 1 else f"{year}-{month - 1:02d}"


def _budget_name(counter: Counter) -> str:
    match counter.scope:
        case "day":
            return f"daily budget ({counter.period})"
        case "month":
            return f"monthly budget ({counter.period})"
        case "chat":
            return f"daily budget of chat {counter.chat_id}"
        case "member":
            return f"daily budget of member {counter.user_id} in chat {counter.chat_id}"

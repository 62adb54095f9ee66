"""`/metrics`: the bot's counters in the Prometheus text format (prometheus-client).

Counters count what this process saw since it started (the live feed: ledger lines and
trims); inbound messages are read from the store at scrape time, so they are right in a
standalone dashboard too. A turn's latency runs from the start of its first model call to
the end of its last one; a turn is closed when its session starts another turn or after
`TURN_IDLE_SECONDS` without a call. Compaction (summary) calls are model calls and count their
tokens; they are counted apart too, and belong to no turn's latency.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from bot.agent.ledger import LedgerEntry

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
TURN_IDLE_SECONDS = 60.0
MAX_OPEN_TURNS = 10_000
LATENCY_BUCKETS = (0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120)


@dataclass(slots=True)
class _OpenTurn:
    turn_id: str
    started: datetime
    ended: datetime


class _InboundCollector(Collector):
    """Reports the stored inbound message count last read from the store."""

    def __init__(self) -> None:
        self.value: int | None = None

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "tgbot_inbound_messages", "Inbound messages from people stored so far"
        )
        if self.value is not None:
            family.add_metric([], self.value)
        yield family


class _UpdateAgeCollector(Collector):
    """Reports how long ago updates were last read (`tgbot run` only)."""

    def __init__(self) -> None:
        self.value: float | None = None

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "tgbot_last_update_age_seconds",
            "Seconds since a getUpdates last completed (webhook: since Telegram last "
            "reported clean deliveries)",
        )
        if self.value is not None:
            family.add_metric([], self.value)
        yield family


@dataclass(frozen=True, slots=True)
class BudgetGauge:
    """One bot-wide budget as `/metrics` reports it (`bot.agent.spend`)."""

    budget: str
    """`day` or `month`."""
    spent_cost: float
    spent_tokens: int
    limit_cost: float
    """0: no limit on money."""
    limit_tokens: int
    used: float | None
    """Of the limit (1.0 = reached); None without one."""


class _BudgetCollector(Collector):
    """Reports the bot's budgets last read from the spend counters (at scrape time)."""

    def __init__(self) -> None:
        self.gauges: list[BudgetGauge] = []

    def collect(self) -> Iterator[Metric]:
        spent = GaugeMetricFamily(
            "tgbot_budget_spent",
            "What each bot-wide budget spent this period (cost in the ledger's currency, "
            "billable-equivalent tokens)",
            labels=["budget", "unit"],
        )
        limit = GaugeMetricFamily(
            "tgbot_budget_limit",
            "Each bot-wide budget limit (set parts only)",
            labels=["budget", "unit"],
        )
        used = GaugeMetricFamily(
            "tgbot_budget_used_ratio",
            "How much of each bot-wide budget is used (1 = reached)",
            labels=["budget"],
        )
        for gauge in self.gauges:
            spent.add_metric([gauge.budget, "cost"], gauge.spent_cost)
            spent.add_metric([gauge.budget, "tokens"], gauge.spent_tokens)
            if gauge.limit_cost > 0:
                limit.add_metric([gauge.budget, "cost"], gauge.limit_cost)
            if gauge.limit_tokens > 0:
                limit.add_metric([gauge.budget, "tokens"], gauge.limit_tokens)
            if gauge.used is not None:
                used.add_metric([gauge.budget], gauge.used)
        yield from (spent, limit, used)


class DashboardMetrics:
    """One registry per dashboard (tests run several side by side)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.inbound = _InboundCollector()
        self.registry.register(self.inbound)
        self.budgets = _BudgetCollector()
        self.registry.register(self.budgets)
        self.update_age = _UpdateAgeCollector()
        self.registry.register(self.update_age)
        self.calls = Counter("tgbot_model_calls", "Model calls", ["scene"], registry=self.registry)
        self.input_tokens = Counter(
            "tgbot_input_tokens", "Input tokens the provider reported", registry=self.registry
        )
        self.cached_tokens = Counter(
            "tgbot_cached_input_tokens", "Cached input tokens", registry=self.registry
        )
        self.cache_write_tokens = Counter(
            "tgbot_cache_write_input_tokens",
            "Input tokens the provider wrote to its cache (part of the input tokens)",
            registry=self.registry,
        )
        self.truncated = Counter(
            "tgbot_truncated_calls",
            "Calls the provider silently truncated (reported input far below what was sent)",
            registry=self.registry,
        )
        self.output_tokens = Counter(
            "tgbot_output_tokens", "Output tokens the provider reported", registry=self.registry
        )
        self.trims = Counter("tgbot_history_trims", "History trims", registry=self.registry)
        self.errors = Counter("tgbot_model_errors", "Failed model calls", registry=self.registry)
        self.compactions = Counter(
            "tgbot_compactions",
            "Compaction calls (summaries of old turns), included in the model calls",
            registry=self.registry,
        )
        self.call_latency = Histogram(
            "tgbot_model_call_latency_seconds",
            "Latency of one model call",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.turn_latency = Histogram(
            "tgbot_turn_latency_seconds",
            "From the first model call of a turn to the end of its last one",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self._turns: dict[int, _OpenTurn] = {}

    def observe_call(self, entry: LedgerEntry) -> None:
        self.calls.labels(scene=entry.scene or "unknown").inc()
        if entry.input_tokens is not None:
            self.input_tokens.inc(entry.input_tokens)
        if entry.cached_tokens is not None:
            self.cached_tokens.inc(entry.cached_tokens)
        if entry.cache_write_tokens:
            self.cache_write_tokens.inc(entry.cache_write_tokens)
        if entry.input_truncated_by_provider:
            self.truncated.inc()
        if entry.output_tokens is not None:
            self.output_tokens.inc(entry.output_tokens)
        if entry.error is not None:
            self.errors.inc()
        self.call_latency.observe(entry.latency_ms / 1000)
        if entry.purpose == "transcription":
            return  # a voice note read before its turn: no model turn of its own
        if entry.purpose == "compaction":
            self.compactions.inc()
            return  # off the member's turn: its latency is not the turn's
        self._follow_turn(entry)

    def observe_trim(self) -> None:
        self.trims.inc()

    def _follow_turn(self, entry: LedgerEntry) -> None:
        ended = entry.ts
        started = ended - timedelta(milliseconds=entry.latency_ms)
        open_turn = self._turns.get(entry.session)
        if open_turn is not None and open_turn.turn_id == entry.turn_id:
            open_turn.ended = max(open_turn.ended, ended)
            return
        if open_turn is not None:
            self._close(entry.session)
        if len(self._turns) >= MAX_OPEN_TURNS:
            self._close(next(iter(self._turns)))
        self._turns[entry.session] = _OpenTurn(entry.turn_id, started, ended)

    def _close(self, session: int) -> None:
        turn = self._turns.pop(session)
        self.turn_latency.observe((turn.ended - turn.started).total_seconds())

    def close_idle_turns(self, now: datetime) -> None:
        idle = [
            session
            for session, turn in self._turns.items()
            if (now - turn.ended).total_seconds() >= TURN_IDLE_SECONDS
        ]
        for session in idle:
            self._close(session)

    def render(
        self,
        *,
        now: datetime,
        inbound_messages: int | None,
        budgets: list[BudgetGauge] | None = None,
        last_update_age: float | None = None,
    ) -> bytes:
        self.close_idle_turns(now)
        self.inbound.value = inbound_messages
        self.update_age.value = last_update_age
        self.budgets.gauges = budgets or []
        return generate_latest(self.registry)

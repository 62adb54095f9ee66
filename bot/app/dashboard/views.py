"""What each page shows, as plain values for the templates (no HTTP, no HTML here)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, tzinfo
from typing import Literal, TypeVar

from markupsafe import Markup

from bot.agent.ledger import LedgerEntry
from bot.app.dashboard.charts import bar_chart, line_chart
from bot.app.dashboard.ledger_index import (
    ChatDay,
    DayDigest,
    Spend,
    range_totals,
    sum_spend,
)
from bot.domain.records import StoredRecord
from bot.services.error_log import LoggedError
from bot.services.usage_render import format_cost, format_share, format_tokens
from bot.services.usage_report import Feedback, UsageRow

DEFAULT_DAYS = 14
TOP_CHATS = 20
"""Chats listed in the overview's spend table (the costliest)."""
MAX_DAYS = 366
RECENT_TURNS = 20
CHAT_DAYS = 7
"""How far back the chat page looks in the ledger for turns and trims."""


K = TypeVar("K", int, str)


class BadQuery(ValueError):
    """A query parameter the page cannot use (answered with 400)."""


def parse_day(value: str | None, name: str) -> date | None:
    if value is None or value == "":
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise BadQuery(f"{name}: expected a date as YYYY-MM-DD") from None


def parse_int(value: str | None, name: str, *, default: int) -> int:
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise BadQuery(f"{name}: expected a whole number") from None
    if abs(number) >= 2**63:
        raise BadQuery(f"{name}: out of range")
    return number


def date_range(
    start: date | None, end: date | None, *, today: date, first_data_day: date | None = None
) -> list[date]:
    """The days from `start` to `end` (defaults: the last 14 days up to today, starting no
    earlier than `first_data_day`, the first day with a ledger file, when it is inside them)."""
    end = end or today
    if start is None:
        start = end - timedelta(days=DEFAULT_DAYS - 1)
        if first_data_day is not None and start < first_data_day <= end:
            start = first_data_day
    if end > today:
        raise BadQuery("to: the range cannot end after today")
    if start > end:
        raise BadQuery("from: the range starts after it ends")
    if (end - start).days + 1 > MAX_DAYS:
        raise BadQuery(f"from: at most {MAX_DAYS} days at once")
    return [start + timedelta(days=i) for i in range((end - start).days + 1)]


# ---------------------------------------------------------------- overview


@dataclass(frozen=True, slots=True, kw_only=True)
class DayLine:
    day: date
    calls: int
    turns: int
    input_p50: int | None
    input_p90: int | None
    cache_hit_rate: float | None
    billable_equivalent: float
    output_tokens: int
    cost: float | None
    trims: int
    errors: int
    compaction_calls: int = 0
    compaction_share: float | None = None
    """Of the cost where prices are set, else of the billable-equivalent input (the report's
    `compaction_share`)."""
    cache_write_tokens: int = 0
    cache_write_rate: float | None = None
    cache_write_share: float | None = None
    """The report's `cache_write_share`: of the cost where prices are set, else of the
    billable-equivalent input."""
    truncated_calls: int = 0
    history_share: float | None = None
    fixed_share: float | None = None
    """Shares of our input estimate (the report's)."""
    reasoning_tokens: int = 0
    """The part of `output_tokens` the models spent thinking."""

    @property
    def current_share(self) -> float | None:
        """The rest of the estimate: per-turn context, the current message and images."""
        if self.history_share is None or self.fixed_share is None:
            return None
        return max(0.0, 1.0 - self.history_share - self.fixed_share)


@dataclass(frozen=True, slots=True, kw_only=True)
class Overview:
    start: date
    end: date
    days: tuple[DayLine, ...]
    totals: UsageRow
    """The range taken together: the usage report's total row over its days."""
    charts: Mapping[str, Markup]
    corrupt_lines: int
    feedback: Feedback = field(default_factory=Feedback)
    """Reactions on the bot's messages over the range (from the store, not the ledger)."""
    by_model: tuple[tuple[str, Spend], ...] = ()
    by_chat: tuple[tuple[int, Spend], ...] = ()
    """Where tokens and money went over the range, the costliest first (then the most
    input); chats cut to `TOP_CHATS`."""
    chats_left_out: int = 0


def build_overview(digests: Sequence[DayDigest], *, currency: str = "") -> Overview:
    lines = tuple(
        DayLine(
            day=d.day,
            calls=d.row.calls,
            turns=d.row.turns,
            input_p50=d.row.input_p50,
            input_p90=d.row.input_p90,
            cache_hit_rate=d.row.cache_hit_rate,
            billable_equivalent=d.billable_equivalent,
            output_tokens=d.row.output_tokens,
            cost=d.row.cost,
            trims=d.row.trims,
            errors=d.row.errors,
            compaction_calls=d.row.compaction_calls,
            compaction_share=d.row.compaction_share,
            cache_write_tokens=d.row.cache_write_tokens,
            cache_write_rate=d.row.cache_write_rate,
            cache_write_share=d.row.cache_write_share,
            truncated_calls=d.row.truncated_calls,
            history_share=d.row.history_share,
            fixed_share=d.row.fixed_share,
            reasoning_tokens=d.row.reasoning_tokens,
        )
        for d in digests
    )
    labels = [line.day.strftime("%m-%d") for line in lines]
    charts = {
        "calls": bar_chart(
            labels,
            [line.calls for line in lines],
            title="Model calls per day",
            fmt=_count,
            unit="calls",
        ),
        "input": line_chart(
            labels,
            [
                ("p50", [line.input_p50 for line in lines]),
                ("p90", [line.input_p90 for line in lines]),
            ],
            title="Input tokens per call, p50 and p90",
            fmt=_tokens,
            unit="tokens / call",
        ),
        "billable": bar_chart(
            labels,
            [line.billable_equivalent for line in lines],
            title="Billable-equivalent input per day",
            fmt=_tokens,
            unit="tokens / day",
        ),
        "cache": line_chart(
            labels,
            [
                ("cache hit", [line.cache_hit_rate for line in lines]),
                ("cache write", [line.cache_write_rate for line in lines]),
            ]
            if any(line.cache_write_tokens for line in lines)
            else [("cache hit", [line.cache_hit_rate for line in lines])],
            title="Cache hit and write rate per day",
            fmt=lambda v: format_share(v),
            unit="% of input",
        ),
        "split": line_chart(
            labels,
            [
                ("history", [line.history_share for line in lines]),
                ("fixed", [line.fixed_share for line in lines]),
                ("current", [line.current_share for line in lines]),
            ],
            title="Our input estimate split per day: history, fixed, current",
            fmt=lambda v: format_share(v),
            unit="% of estimate",
        ),
    }
    if any(line.cost for line in lines):
        charts["cost"] = bar_chart(
            labels,
            [line.cost for line in lines],
            title="Cost per day",
            fmt=format_cost,
            unit=f"{currency or 'cost'} / day",
        )
    by_chat = _costliest(sum_spend(d.by_chat for d in digests))
    return Overview(
        by_model=_costliest(sum_spend(d.by_model for d in digests)),
        by_chat=by_chat[:TOP_CHATS],
        chats_left_out=max(0, len(by_chat) - TOP_CHATS),
        start=digests[0].day,
        end=digests[-1].day,
        days=lines,
        totals=range_totals(digests),
        charts=charts,
        corrupt_lines=sum(d.corrupt_lines for d in digests),
    )


def chat_spend(digests: Sequence[DayDigest]) -> dict[int, Spend]:
    """Each chat's tokens and cost over the days of `digests` (the chat list's column)."""
    return sum_spend(d.by_chat for d in digests)


def spend_days(today: date) -> list[date]:
    """The days the chat list sums spend over: the overview's default range."""
    return [today - timedelta(days=DEFAULT_DAYS - 1 - i) for i in range(DEFAULT_DAYS)]


def _costliest(spend: Mapping[K, Spend]) -> tuple[tuple[K, Spend], ...]:
    return tuple(
        sorted(
            spend.items(),
            key=lambda item: (item[1].cost or 0.0, item[1].input_tokens, item[1].calls),
            reverse=True,
        )
    )


def _count(value: float) -> str:
    return f"{value:,.0f}"


def _tokens(value: float) -> str:
    return format_tokens(round(value))


# ---------------------------------------------------------------- one chat


@dataclass(frozen=True, slots=True, kw_only=True)
class AliasLine:
    alias: str
    message_id: int | None
    kind: str
    sender: str
    text: str
    at: datetime | None = None
    """When the record was stored."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TimelineEvent:
    """A history trim or a compaction call of the chat page's timeline."""

    kind: Literal["trim", "compaction"]
    entry: LedgerEntry

    @property
    def ts(self) -> datetime:
        return self.entry.ts


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnCalls:
    turn_id: str
    started: datetime
    calls: tuple[LedgerEntry, ...]

    @property
    def input_tokens(self) -> int:
        return sum(c.input_tokens or 0 for c in self.calls)

    @property
    def latency_ms(self) -> int:
        return sum(c.latency_ms for c in self.calls)

    @property
    def errors(self) -> int:
        return sum(1 for c in self.calls if c.error is not None)


def alias_lines(records: Sequence[StoredRecord], *, limit: int = 80) -> tuple[AliasLine, ...]:
    """Aliases of the window's records, newest last (the last `limit` of them)."""
    lines: list[AliasLine] = []
    for record in records:
        body = record.body
        sender = ""
        text = ""
        match body.kind:
            case "user":
                sender, text = body.sender.name, body.text
            case "assistant":
                sender, text = "bot", body.text
            case "event":
                sender, text = (body.actor.name if body.actor else ""), body.text
            case _:
                pass
        for alias, message_id in zip(record.alias_parts, record.message_ids, strict=False):
            if alias is None:
                continue
            lines.append(
                AliasLine(
                    alias=alias,
                    message_id=message_id,
                    kind=record.body.kind,
                    sender=sender,
                    text=_excerpt(text),
                    at=record.created_at,
                )
            )
    return tuple(lines[-limit:])


def _excerpt(text: str, limit: int = 90) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def chat_ledger(
    days: Sequence[ChatDay], *, session: int, turns: int = RECENT_TURNS
) -> tuple[tuple[TimelineEvent, ...], tuple[TurnCalls, ...]]:
    """(trims and compaction calls newest first, recent turns newest first) of one session,
    from its chat's days (oldest day first). A compaction call that also carries a trim
    appears twice: the trim and the summary call are two things that happened."""
    timeline = [
        TimelineEvent(kind="trim", entry=entry)
        for day in days
        for entry in day.trims
        if entry.session == session
    ]
    timeline.extend(
        TimelineEvent(kind="compaction", entry=entry)
        for day in days
        for entry in day.compactions
        if entry.session == session
    )
    timeline.sort(key=lambda event: (event.ts, event.kind == "compaction"), reverse=True)
    calls = [entry for day in days for entry in day.recent if entry.session == session]
    grouped: dict[tuple[int, str], list[LedgerEntry]] = {}
    for entry in calls:
        grouped.setdefault((entry.session, entry.turn_id or entry.ts.isoformat()), []).append(entry)
    ordered = sorted(grouped.values(), key=lambda group: group[0].ts, reverse=True)[:turns]
    recent = tuple(
        TurnCalls(
            turn_id=group[0].turn_id,
            started=group[0].ts,
            calls=tuple(sorted(group, key=lambda e: (e.ts, e.iteration))),
        )
        for group in ordered
    )
    return tuple(timeline), recent


def local(value: datetime | str | None, zone: tzinfo) -> str:
    """A time in the dashboard's zone (an ISO string, as traces keep it, too)."""
    if value is None or value == "":
        return "-"
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return str(value)
    return value.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S")


# ---------------------------------------------------------------- errors

ErrorKind = Literal["failed_call", "fallback", "refused_budget", "refused_send", "skipped_update"]
ERROR_KINDS: Mapping[ErrorKind, str] = {
    "failed_call": "failed model call",
    "fallback": "fell back",
    "refused_budget": "refused: budget",
    "refused_send": "refused send",
    "skipped_update": "skipped update",
}
MAX_ERRORS = 500
ERROR_DAYS = 7
"""The error list's default range."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorLine:
    """One row of the error list; `call_id` links a failed call to its trace."""

    ts: datetime
    kind: ErrorKind
    chat: int | None
    reason: str
    call_id: str = ""
    update_id: int | None = None

    @property
    def label(self) -> str:
        return ERROR_KINDS[self.kind]


def _call_line(entry: LedgerEntry) -> ErrorLine:
    """A failed call's row, or a switch's: the fallback that took a call its route failed."""
    if entry.error is None and entry.fallback_from is not None:
        reason = f"{entry.fallback_from} was down: {entry.route} ({entry.model}) answered"
        return ErrorLine(
            ts=entry.ts, kind="fallback", chat=entry.chat, reason=reason, call_id=entry.call_id
        )
    return ErrorLine(
        ts=entry.ts,
        kind="refused_budget" if entry.refused == "budget" else "failed_call",
        chat=entry.chat,
        reason=entry.error or "",
        call_id="" if entry.refused else entry.call_id,  # never sent: no trace
    )


def error_lines(
    digests: Sequence[DayDigest], logged: Iterable[LoggedError], *, limit: int = MAX_ERRORS
) -> tuple[tuple[ErrorLine, ...], int]:
    """(the newest `limit` errors of the range, newest first; how many were left out):
    the failed calls of the ledger and the error log's refused sends and skipped updates."""
    lines = [_call_line(entry) for digest in digests for entry in digest.failed]
    lines.extend(
        ErrorLine(
            ts=error.ts,
            kind=error.kind,
            chat=error.chat,
            reason=error.reason,
            update_id=error.update_id,
        )
        for error in logged
    )
    lines.sort(key=lambda line: line.ts, reverse=True)
    return tuple(lines[:limit]), max(0, len(lines) - limit)

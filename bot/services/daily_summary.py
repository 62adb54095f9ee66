"""The daily usage summary: yesterday's report and a 7-day chart, sent once to the owner.

Once per day across processes: `send_for` first claims the day through the shared
`Claims.claim_daily_summary`; whoever loses the claim sends nothing. A send that fails
after the claim is logged and NOT retried: the claim stays, because a summary sent twice is
worse than one missed (the owner can still ask with `/usage`, which uses `compose`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import date, datetime, time, timedelta, tzinfo
from pathlib import Path

from bot.domain.ids import Locale
from bot.ports import Clock, Messenger
from bot.services.usage_render import format_cost, format_error, format_share, format_tokens
from bot.services.usage_report import UsageReport, load_report, with_feedback
from bot.store_ports import ChatEventStore, Claims
from bot.texts import text

logger = logging.getLogger(__name__)

CHART_DAYS = 7


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryMessage:
    """What the owner receives: a short text and a PNG chart (`None` if it failed to draw)."""

    day: date
    text: str
    chart: bytes | None
    caption: str


class DailySummary:
    """Builds and sends the usage summary of one calendar day in the bot's zone."""

    def __init__(
        self,
        ledger_dir: Path,
        zone: tzinfo,
        owner_chat_id: int,
        messenger: Messenger,
        claims: Claims,
        clock: Clock,
        *,
        locale: Locale = "zh",
        reactions: ChatEventStore | None = None,
        currency: str = "",
        owner_locale: Callable[[], Locale] | None = None,
    ) -> None:
        self._owner_locale = owner_locale
        """The owner's language (`BOT_LOCALE=auto`); None: `locale`."""
        self._currency = currency
        self._reactions = reactions
        """Where the 👍/👎 feedback is read (none counted when unset)."""
        self._ledger_dir = ledger_dir
        self._zone = zone
        self._owner = owner_chat_id
        self._messenger = messenger
        self._claims = claims
        self._clock = clock
        self._locale = locale

    def yesterday(self) -> date:
        return self._clock.now().astimezone(self._zone).date() - timedelta(days=1)

    async def send_yesterday(self) -> bool:
        """The scheduled job: send yesterday's summary unless another process already did."""
        return await self.send_for(self.yesterday())

    async def send_for(self, day: date) -> bool:
        """Claim `day`, then send its summary; True when the text reached the owner.

        False when the day was already claimed (nothing is sent) or when sending failed
        (logged; the claim stays, see the module docstring).
        """
        if not await self._claims.claim_daily_summary(day):
            logger.info("daily summary for %s already claimed; not sending", day)
            return False
        try:
            message = await self.compose(day)
        except Exception:
            logger.exception("daily summary for %s could not be built; not sent", day)
            return False
        return await self._deliver(message)

    async def compose(self, day: date) -> SummaryMessage:
        """The summary of `day` without claiming or sending (for `/usage`)."""
        days = [day - timedelta(days=CHART_DAYS - 1 - i) for i in range(CHART_DAYS)]
        report = await asyncio.to_thread(load_report, self._ledger_dir, zone=self._zone, days=days)
        report = replace(report, currency=self._currency)
        if self._reactions is not None:
            start = datetime.combine(days[0], time(), self._zone)
            end = datetime.combine(day + timedelta(days=1), time(), self._zone)
            found = await self._reactions.reactions_between(start, end)
            report = with_feedback(
                report, ((r.created_at, r.chat_id, r.emoji) for r in found), zone=self._zone
            )
        try:
            # drawn once a day: Pillow and the chart load then, not in every serving process
            from bot.services.chart import render_usage_chart

            chart: bytes | None = await asyncio.to_thread(render_usage_chart, report)
        except Exception:  # a chart is a nicety; the text still goes out
            logger.exception("daily summary chart for %s failed", day)
            chart = None
        locale = self._owner_locale() if self._owner_locale is not None else self._locale
        return SummaryMessage(
            day=day,
            text=format_summary_text(report, day, locale),
            chart=chart,
            caption=text(locale, "summary_caption", n=CHART_DAYS),
        )

    async def _deliver(self, message: SummaryMessage) -> bool:
        sent = False
        try:
            delivery = await self._messenger.send_text(self._owner, message.text)
            sent = delivery.delivered
            if delivery.error is not None:
                logger.error(
                    "daily summary for %s only partly sent: %s", message.day, delivery.error
                )
        except Exception:
            logger.exception("daily summary text for %s was not sent", message.day)
        if message.chart is not None:
            try:
                await self._messenger.send_photo(
                    self._owner, message.chart, caption=message.caption
                )
            except Exception:
                logger.exception("daily summary chart for %s was not sent", message.day)
        return sent


def format_summary_text(report: UsageReport, day: date, locale: Locale = "zh") -> str:
    """A few short lines about `day` from `report` (which must cover that day)."""
    row = report.row_for(day)

    lines = [text(locale, "summary_title", day=day.isoformat(), zone=report.zone)]
    if not row.calls:
        lines.append(text(locale, "summary_empty"))
    else:
        mean = row.calls_per_turn.mean
        lines.append(
            text(
                locale,
                "summary_calls",
                calls=f"{row.calls:,}",
                turns=f"{row.turns:,}",
                mean="-" if mean is None else f"{mean:.1f}",
                cap=row.cap_turns,
            )
        )
        input_line = text(
            locale,
            "summary_input",
            p50=format_tokens(row.input_p50),
            p90=format_tokens(row.input_p90),
        )
        if row.estimated_calls:
            input_line += text(locale, "summary_estimated", n=row.estimated_calls)
        lines.append(input_line)
        lines.append(
            text(
                locale,
                "summary_shares",
                history=format_share(row.history_share),
                fixed=format_share(row.fixed_share),
            )
        )
        lines.append(
            text(
                locale,
                "summary_cache",
                cache=format_share(row.cache_hit_rate),
                billable=format_tokens(
                    None
                    if row.billable_equivalent_per_call is None
                    else round(row.billable_equivalent_per_call)
                ),
                output=format_tokens(row.output_tokens),
            )
        )
        if row.cache_write_tokens:
            lines.append(
                text(
                    locale,
                    "summary_cache_writes",
                    writes=format_tokens(row.cache_write_tokens),
                    rate=format_share(row.cache_write_rate),
                    share=format_share(row.cache_write_share),
                    base=text(locale, "summary_cost_base" if row.cost else "summary_weight_base"),
                )
            )
        if row.reasoning_tokens:
            lines.append(
                text(
                    locale,
                    "summary_reasoning",
                    reasoning=format_tokens(row.reasoning_tokens),
                    output=format_tokens(row.output_tokens),
                )
            )
        if row.refusals or row.cut_at_length:
            lines.append(
                text(locale, "summary_stops", refusals=row.refusals, cut=row.cut_at_length)
            )
        if row.truncated_calls:
            lines.append(text(locale, "summary_truncated", n=row.truncated_calls))
        for drift in row.drift:
            corrected = drift.corrected
            lines.append(
                text(
                    locale,
                    "summary_drift",
                    route=drift.route,
                    median=format_error(drift.raw.median),
                    p90=format_error(drift.raw.p90),
                    corrected="-" if corrected is None else format_error(corrected.p90),
                )
            )
        lines.append(
            text(
                locale,
                "summary_misc",
                trims=row.trims,
                errors=row.errors,
                cost=format_cost(row.cost, report.currency),
            )
        )
        if row.compaction_calls:
            lines.append(
                text(
                    locale,
                    "summary_compaction",
                    calls=row.compaction_calls,
                    share=format_share(row.compaction_share),
                    # with no prices the share is of the billable-equivalent input
                    base=text(locale, "summary_cost_base" if row.cost else "summary_weight_base"),
                )
            )
    if row.feedback.total:
        feedback = row.feedback
        lines.append(
            text(
                locale,
                "summary_feedback",
                up=feedback.up,
                down=feedback.down,
                other=feedback.other,
            )
        )
    skipped = report.corrupt_lines + report.partial_lines
    if skipped:
        lines.append(text(locale, "summary_skipped", n=skipped))
    return "\n".join(lines)

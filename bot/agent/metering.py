"""Metering: every model call becomes one ledger line and the session's `/context` meter.

`CallMetering` subscribes to the runtime's `EventBus` (`ModelCalled`); the runtime itself
neither builds ledger entries nor writes files. The ledger line is written in a worker
thread (`LedgerWriter.append_async`), so a slow disk never stalls the event loop; the call
that published the event waits for it, which keeps a session's lines in call order.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass, replace
from datetime import datetime

from bot.agent.events import EventBus, ModelCalled
from bot.agent.ledger import LedgerEntry, LedgerWriter, TrimInfo, describe_error
from bot.agent.token_truth import TokenTruth

log = logging.getLogger("tgbot.runtime")

MAX_METERS = 10_000


@dataclass(frozen=True, slots=True, kw_only=True)
class CallMeter:
    """What `/context` shows about the last model call of a session."""

    model: str
    context_window: int | None
    budget: int
    history_budget: int
    estimated_input: int
    corrected_input: int
    reported_input: int | None
    cached_tokens: int | None
    kept_turns: int
    dropped_turns: int
    at: datetime


def ledger_entry(call: ModelCalled, *, corrected: int | None = None) -> LedgerEntry:
    """The ledger line of one model call; `corrected` is the corrected total estimate."""
    usage = call.usage
    key = call.session.key
    return LedgerEntry(
        ts=call.at,
        session=call.session.id,
        chat=key.chat_id,
        thread=key.thread_id,
        scene=call.session.scene,
        turn_id=call.turn_id,
        iteration=call.iteration,
        purpose="compaction"
        if call.purpose == "compaction"
        else "final_summary"
        if call.final
        else "turn",
        provider=call.route.provider_name,
        model=call.route.model,
        input_tokens=usage.input_tokens if usage else None,
        cached_tokens=usage.cached_tokens if usage else None,
        output_tokens=usage.output_tokens if usage else None,
        est_fixed=call.fixed_tokens,
        est_history=call.tokens.history,
        est_current=call.tokens.current,
        est_images=call.tokens.images,
        est_corrected=corrected,
        trims=tuple(
            TrimInfo(
                reason=trim.reason,
                dropped_turns=trim.dropped_turns,
                dropped_messages=trim.dropped_messages,
                kept_turns=trim.kept_turns,
                tokens_before=trim.tokens_before,
                tokens_after=trim.tokens_after,
                budget=trim.budget,
            )
            for trim in call.trims
        ),
        latency_ms=call.latency_ms,
        error=None if call.error is None else describe_error(call.error),
        hit_iteration_cap=call.final,
        cost=call.route.prices.cost(usage) if usage is not None else None,
        tool_calls=call.tool_calls,
        call_id=call.call_id,
    )


def call_meter(call: ModelCalled, *, corrected: int | None = None) -> CallMeter:
    """The `/context` meter of one model call."""
    usage = call.usage
    estimated = call.fixed_tokens + call.tokens.messages
    return CallMeter(
        model=call.route.model,
        context_window=call.route.context_window,
        budget=call.budget,
        history_budget=call.history_budget,
        estimated_input=estimated,
        corrected_input=estimated if corrected is None else corrected,
        reported_input=usage.input_tokens if usage else None,
        cached_tokens=usage.cached_tokens if usage else None,
        kept_turns=call.kept_turns,
        dropped_turns=call.dropped_turns,
        at=call.at,
    )


class CallMetering:
    """Writes the ledger, keeps the last call of the most recently active sessions, and
    teaches each route's token correction what the provider counted."""

    def __init__(
        self,
        ledger: LedgerWriter,
        *,
        max_meters: int = MAX_METERS,
        truth: TokenTruth | None = None,
    ) -> None:
        self.ledger = ledger
        self.truth = truth if truth is not None else TokenTruth()
        self.max_meters = max_meters
        self.meters: OrderedDict[int, CallMeter] = OrderedDict()
        """Session id → its last call, least recently called first (for `/context`)."""

    def attach(self, bus: EventBus) -> CallMetering:
        bus.on(ModelCalled, self.on_model_call)
        return self

    def last_call(self, session_id: int) -> CallMeter | None:
        return self.meters.get(session_id)

    async def on_model_call(self, call: ModelCalled) -> None:
        # the corrected estimate is what this call was budgeted with: before it teaches
        route = call.route
        entry = ledger_entry(call)
        corrected = (
            call.exact_tokens
            if call.exact_tokens is not None
            else self.truth.corrected(route.provider_name, route.model, entry.est_total)
        )
        entry = replace(entry, est_corrected=corrected)
        if call.purpose != "compaction":  # `/context` shows the member's calls
            self._remember(call, corrected)
        if call.error is None:
            self.truth.observe(
                route.provider_name,
                route.model,
                estimated=entry.est_total,
                reported=entry.input_tokens,
            )
        try:
            await self.ledger.append_async(entry)
        except OSError:
            log.exception("could not write the ledger line")

    def _remember(self, call: ModelCalled, corrected: int) -> None:
        meters = self.meters
        meters.pop(call.session.id, None)
        while len(meters) >= self.max_meters:
            meters.popitem(last=False)
        meters[call.session.id] = call_meter(call, corrected=corrected)

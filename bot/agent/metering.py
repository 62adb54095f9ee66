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
from bot.agent.token_truth import TokenTruth, looks_truncated, route_key
from bot.errors import BudgetExceeded
from bot.tools.mcp import server_of

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
    cache_write_tokens: int | None = None
    truncated_by_provider: bool = False
    """The provider reported far less input than we sent (see `looks_truncated`)."""


def ledger_entry(call: ModelCalled, *, corrected: int | None = None) -> LedgerEntry:
    """The ledger line of one model call; `corrected` is the corrected total estimate."""
    usage = call.usage
    key = call.session.key
    prices = call.route.prices
    # no price configured: the cost is unknown (`null`), not zero
    priced = usage if usage is not None and prices.configured else None
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
        provider=call.route.profile,
        model=call.route.model,
        input_tokens=usage.input_tokens if usage else None,
        cached_tokens=usage.cached_tokens if usage else None,
        cache_write_tokens=usage.cache_write_tokens if usage else None,
        output_tokens=usage.output_tokens if usage else None,
        est_fixed=call.fixed_tokens,
        est_history=call.tokens.history,
        est_current=call.tokens.current,
        est_images=call.tokens.images,
        images=call.tokens.image_count,
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
        refused="budget" if isinstance(call.error, BudgetExceeded) else None,
        hit_iteration_cap=call.final,
        cost=prices.cost(priced) if priced is not None else None,
        cache_write_cost=prices.cache_write_cost(priced) if priced is not None else None,
        tool_calls=call.tool_calls,
        call_id=call.call_id,
        stop=call.response.stop if call.response is not None else None,
        reasoning_tokens=usage.reasoning_tokens if usage else None,
        cache_write_1h_tokens=usage.cache_write_1h_tokens if usage else None,
        mcp_tool_calls=(
            0
            if call.response is None
            else sum(1 for c in call.response.tool_calls if server_of(c.name))
        ),
    )


def call_meter(
    call: ModelCalled, *, corrected: int | None = None, truncated: bool = False
) -> CallMeter:
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
        cache_write_tokens=usage.cache_write_tokens if usage else None,
        truncated_by_provider=truncated,
        kept_turns=call.kept_turns,
        dropped_turns=call.dropped_turns,
        at=call.at,
    )


class CallMetering:
    """Writes the ledger, keeps the last call of the most recently active sessions, and
    teaches each route's token correction what the provider counted.

    A call whose reported input is far below the corrected estimate (`looks_truncated`:
    Ollama drops the oldest messages instead of refusing an overflow) is flagged on its
    ledger line, warned about once per route, and teaches the correction nothing: its
    ratio is the provider's cut, not its tokenizer."""

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
        self.truncating_routes: set[str] = set()
        """Routes already warned about a silent truncation (one warning each)."""

    def attach(self, bus: EventBus) -> CallMetering:
        bus.on(ModelCalled, self.on_model_call)
        return self

    async def on_model_call(self, call: ModelCalled) -> None:
        # the corrected estimate is what this call was budgeted with: before it teaches
        route = call.route
        entry = ledger_entry(call)
        corrected = (
            call.exact_tokens
            if call.exact_tokens is not None
            else self.truth.corrected(route.profile, route.model, entry.est_total)
        )
        # images leave the comparison: providers count them in very different ways (a
        # fixed 85-1,600 tokens, or by tiles), and a cheap image is no truncation
        truncated = call.error is None and looks_truncated(
            corrected=corrected - entry.est_images, reported=entry.input_tokens
        )
        entry = replace(entry, est_corrected=corrected, input_truncated_by_provider=truncated)
        if call.purpose != "compaction":  # `/context` shows the member's calls
            self._remember(call, corrected, truncated)
        if truncated:
            self._warn_truncated(call, corrected, entry.input_tokens or 0)
        elif call.error is None:
            self.truth.observe(
                route.profile,
                route.model,
                estimated=entry.est_total,
                reported=entry.input_tokens,
            )
        try:
            await self.ledger.append_async(entry)
        except OSError:
            log.exception("could not write the ledger line")

    def _warn_truncated(self, call: ModelCalled, corrected: int, reported: int) -> None:
        key = route_key(call.route.profile, call.route.model)
        if key in self.truncating_routes:
            return
        self.truncating_routes.add(key)
        log.warning(
            "route %s reported %d input tokens for a request we count at %d: the provider "
            "seems to drop the oldest messages silently (Ollama does when a request exceeds "
            "its context); set the model's num_ctx (Ollama: options.num_ctx or PARAMETER "
            "num_ctx in the Modelfile) to at least the route's context window",
            key,
            reported,
            corrected,
        )

    def _remember(self, call: ModelCalled, corrected: int, truncated: bool) -> None:
        meters = self.meters
        meters.pop(call.session.id, None)
        while len(meters) >= self.max_meters:
            meters.popitem(last=False)
        meters[call.session.id] = call_meter(call, corrected=corrected, truncated=truncated)

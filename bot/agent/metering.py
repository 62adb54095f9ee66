"""Metering: every model call becomes one ledger line and the session's `/context` meter,
and metering learns the per-route token corrections from those lines (`TokenTruth`).

`CallMetering` subscribes to the runtime's `EventBus` (`ModelCalled`); the runtime itself
neither builds ledger entries nor writes files. The ledger line is written in a worker
thread (`LedgerWriter.append_async`), so a slow disk never stalls the event loop; the call
that published the event waits for it, which keeps a session's lines in call order.

The corrections (per route, kept in one JSON file in DATA_DIR): every ledger line carries
our estimate of the call's input (`est_total`) and, when the provider answered, the
`input_tokens` it counted. `TokenTruth.observe` feeds that pair to the route's
`TokenCorrection` (bounded, see `bot.context.tokens`) and writes the book back, so the
correction survives a restart: at once after the first change, then at most once every
`SAVE_INTERVAL_SECONDS` while calls keep coming (a busy bot makes many calls a second), and
whatever is pending at shutdown (`flush`). A crash loses at most those few seconds of
learning. A route is `provider/model`, the same key the ledger and the usage report use.

The file (`<data dir>/token-corrections.json`, replaced atomically; a missing or unreadable
one starts every route fresh) is `bot.agent.token_corrections_file`'s. On PostgreSQL
(several workers) the book is also shared (`shared`, `storage.token_corrections`), without
a lock per call: each worker learns in memory and publishes its own row per route (its
ratio and the calls it learned from) as it saves, at most every `SAVE_INTERVAL_SECONDS` and
once more that long after the last change, then adopts the routes' shared state (the
samples-weighted mean of every worker's recent row). So every worker learns from every call,
a few seconds late. A worker that starts adopts the shared state before its first turn
(`load_shared`), so a restart or a new worker begins from what the others learned, not from
its own file.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from bot.agent.error_text import describe_error
from bot.agent.events import EventBus, ModelCalled
from bot.agent.ledger import LedgerEntry
from bot.agent.ledger_file import LedgerWriter
from bot.agent.ledger_trims import TrimInfo
from bot.agent.token_corrections_file import FILE_NAME, read_corrections, write_corrections
from bot.context.tokens import (
    NO_CORRECTION,
    TokenCorrection,
    observe,
)
from bot.errors import BudgetExceeded
from bot.ports import SharedTokenCorrections
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
        purpose=call.purpose
        if call.purpose != "turn"
        else "final_summary"
        if call.final
        else "turn",
        provider=call.route.profile,
        model=call.route.model,
        route=call.route.profile,
        fallback_from=call.route.fallback_from,
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
            else self.truth.correction(route.profile, route.model).apply(entry.est_total)
        )
        # images leave the comparison: providers count them in very different ways (a
        # fixed 85-1,600 tokens, or by tiles), and a cheap image is no truncation
        truncated = call.error is None and looks_truncated(
            corrected=corrected - entry.est_images, reported=entry.input_tokens
        )
        entry = replace(entry, est_corrected=corrected, input_truncated_by_provider=truncated)
        if call.purpose in ("turn", "job"):  # `/context` shows the session's turns' calls
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


# ---------------------------------------------------------------- token corrections

TRUNCATION_RATIO = 0.5
"""A report under half the corrected estimate reads as a request the provider cut."""
TRUNCATION_FLOOR = 2048
"""Below this corrected estimate nothing is flagged: Ollama's smallest default `num_ctx`."""
SAVE_INTERVAL_SECONDS = 5.0


def route_key(provider: str, model: str) -> str:
    return f"{provider}/{model}"


def looks_truncated(*, corrected: int, reported: int | None) -> bool:
    """Whether the provider counted far less input than we sent.

    See docs/architecture.md, Tokens, caches and usage as billed.

    Ollama does not refuse a request over its `num_ctx`: it drops the oldest messages and
    reports what it kept, so the reported input sits far below our corrected estimate.
    A tokenizer that merely counts differently is what the correction learns, and the
    heuristic's usual error stays well inside a factor of two (Chinese at roughly 0.6-1
    real tokens for our 1 a character, see `bot.context.tokens`), so a report
    under half of the corrected estimate is read as a cut. Requests under
    `TRUNCATION_FLOOR` tokens are never flagged: no default context is that small, and
    such calls keep teaching the correction, so a route whose heuristic starts far off
    still learns its ratio and stops being flagged. The caller leaves images out of
    `corrected` (providers count them their own way).
    """
    if reported is None or reported <= 0 or corrected < TRUNCATION_FLOOR:
        return False
    return reported < TRUNCATION_RATIO * corrected


class TokenTruth:
    """The corrections of every route, in memory, persisted after a change (at most once
    every `save_interval` seconds; `flush` writes what is pending)."""

    def __init__(
        self,
        path: Path | None = None,
        routes: Mapping[str, TokenCorrection] | None = None,
        *,
        save_interval: float = SAVE_INTERVAL_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
        shared: SharedTokenCorrections | None = None,
    ) -> None:
        self.path = path
        self.shared = shared
        """Set on PostgreSQL: each save also publishes this worker's rows and adopts the
        shared state (`_share`), so all workers learn from all calls."""
        self._sharing: asyncio.Task[None] | None = None
        self._share_again = False
        self._later: asyncio.TimerHandle | None = None
        self._own: dict[str, int] = {}
        """Per route, the calls this worker learned from since it started (its row's samples)."""
        self._routes: dict[str, TokenCorrection] = dict(routes or {})
        self._save_interval = save_interval
        self._monotonic = monotonic
        self._saved_at: float | None = None
        self._pending = False

    @classmethod
    def load(cls, data_dir: Path) -> TokenTruth:
        """The book persisted in `data_dir` (fresh when there is none or it is unreadable)."""
        path = data_dir / FILE_NAME
        return cls(path, read_corrections(path))

    @property
    def routes(self) -> Mapping[str, TokenCorrection]:
        return dict(self._routes)

    def correction(self, provider: str, model: str) -> TokenCorrection:
        return self._routes.get(route_key(provider, model), NO_CORRECTION)

    def observe(
        self, provider: str, model: str, *, estimated: int, reported: int | None
    ) -> TokenCorrection:
        """Learn from one call and persist when the state changed; returns the new state."""
        key = route_key(provider, model)
        before = self._routes.get(key, NO_CORRECTION)
        after = observe(before, estimated=estimated, reported=reported)
        if after != before:
            self._routes[key] = after
            self._own[key] = self._own.get(key, 0) + 1
            self._pending = True
            now = self._monotonic()
            if self._saved_at is None or now - self._saved_at >= self._save_interval:
                self.save()
            elif self.shared is not None and self._later is None:
                # no more calls may come: publish this one anyway, once the interval is over
                wait = self._save_interval - (now - self._saved_at)
                self._later = asyncio.get_running_loop().call_later(wait, self._save_later)
        return after

    def _save_later(self) -> None:
        self._later = None
        if self._pending:
            self.save()

    def _share(self) -> None:
        """Publish this worker's rows and adopt the shared state, in the background; one
        publication at a time (a save meanwhile publishes again when it ends)."""
        if self._sharing is not None:
            self._share_again = True
            return
        self._sharing = asyncio.get_running_loop().create_task(self._publish())

    async def _publish(self) -> None:
        shared = self.shared
        assert shared is not None
        try:
            while True:
                self._share_again = False
                own = {
                    key: TokenCorrection(ratio=self._routes[key].ratio, samples=samples)
                    for key, samples in self._own.items()
                }
                before = dict(self._routes)
                try:
                    merged = await shared.publish(own)
                except Exception as exc:  # the database away must not fail a member's turn
                    log.warning("token corrections: shared update failed (%s)", exc)
                    return
                for key, state in merged.items():
                    if self._routes.get(key) == before.get(key):  # no call of ours meanwhile
                        self._routes[key] = state
                if not self._share_again:
                    return
        finally:
            self._sharing = None

    async def load_shared(self) -> None:
        """Adopt every route's shared state (at start-up; nothing without `shared`).
        The database away leaves this worker's own copy: it is never fatal."""
        if self.shared is None:
            return
        try:
            routes = await self.shared.load()
        except Exception as exc:
            log.warning("token corrections: shared table unreadable (%s); keeping the file", exc)
            return
        self._routes.update(routes)

    async def flush_shared(self) -> None:
        """Publish what is not yet shared and wait until it is (shutdown, tests)."""
        if self.shared is None:
            return
        if self._later is not None:
            self._later.cancel()
            self._later = None
        if self._pending:
            self.save()
        while self._sharing is not None:
            await asyncio.shield(self._sharing)

    def flush(self) -> None:
        """Write the changes not yet saved (at shutdown)."""
        if self._pending:
            self.save()

    def save(self) -> None:
        self._pending = False
        self._saved_at = self._monotonic()
        if self.shared is not None and self._own:
            self._share()
        if self.path is not None:
            write_corrections(self.path, self._routes)

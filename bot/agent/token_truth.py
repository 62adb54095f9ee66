"""Per-route token corrections learned from the ledger, kept in one JSON file in DATA_DIR.

Every ledger line carries our estimate of the call's input (`est_total`) and, when the
provider answered, the `input_tokens` it counted. `TokenTruth.observe` feeds that pair to the
route's `TokenCorrection` (bounded, see `bot.context.tokens`) and writes the book
back, so the correction survives a restart: at once after the first change, then at most once
every `SAVE_INTERVAL_SECONDS` while calls keep coming (a busy bot makes many calls a second),
and whatever is pending at shutdown (`flush`). A crash loses at most those few seconds of
learning. A route is `provider/model`, the same key the ledger and the usage report use.

File: `<data dir>/token-corrections.json`, `{"version": 1, "routes": {"<provider>/<model>":
{"ratio": 0.83, "samples": 57}}}`, replaced atomically (write a temporary file, then
`os.replace`). A missing or unreadable file starts every route fresh; it is never fatal.
On PostgreSQL (several workers) the book is also shared (`shared`, `storage.token_corrections`),
without a lock per call: each worker learns in memory and publishes its own row per route
(its ratio and the calls it learned from) as it saves, at most every `SAVE_INTERVAL_SECONDS`
and once more that long after the last change, then adopts the routes' shared state (the
samples-weighted mean of every worker's recent row). So every worker learns from every call,
a few seconds late. A worker that starts adopts the shared state before its first turn
(`load_shared`), so a restart or a new worker begins from what the others learned, not from
its own file.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from bot.context.tokens import (
    NO_CORRECTION,
    TokenCorrection,
    corrections_from_dict,
    corrections_to_dict,
    observe,
)
from bot.ports import SharedTokenCorrections

log = logging.getLogger(__name__)

FILE_NAME = "token-corrections.json"
TRUNCATION_RATIO = 0.5
"""A report under half the corrected estimate reads as a request the provider cut."""
TRUNCATION_FLOOR = 2048
"""Below this corrected estimate nothing is flagged: Ollama's smallest default `num_ctx`."""
VERSION = 1
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
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return cls(path)
        except (OSError, ValueError) as exc:
            log.warning("token corrections: %s unreadable (%s); starting fresh", path, exc)
            return cls(path)
        routes = raw.get("routes") if isinstance(raw, dict) else None
        if not isinstance(routes, dict):
            log.warning("token corrections: %s has no routes; starting fresh", path)
            return cls(path)
        return cls(path, corrections_from_dict(routes))

    @property
    def routes(self) -> Mapping[str, TokenCorrection]:
        return dict(self._routes)

    def correction(self, provider: str, model: str) -> TokenCorrection:
        return self._routes.get(route_key(provider, model), NO_CORRECTION)

    def corrected(self, provider: str, model: str, estimate: int) -> int:
        """Our estimate scaled by what the route has learned."""
        return self.correction(provider, model).apply(estimate)

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
        if self.path is None:
            return
        data = {"version": VERSION, "routes": corrections_to_dict(self._routes)}
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temporary.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
            os.replace(temporary, self.path)
        except OSError as exc:  # a full disk must not fail a member's turn
            log.warning("token corrections: could not write %s (%s)", self.path, exc)

"""The live feed behind `/events` and `/metrics`: model calls, history trims and errors.

Inside `tgbot run` the feed subscribes to the runtime's `EventBus`: `ModelCalled` (as the
ledger line it becomes) and `HistoryTrimmed`, as they happen. A standalone `tgbot dashboard`
beside a bot running elsewhere follows the ledger instead: the ledger tail polls today's day
file and turns each appended line into a `model_call` (a `compaction` when it is a summary call,
`purpose: "compaction"`), an `error` when the call failed and a `trim` when it carries trim
info. Subscribers get bounded queues: a slow browser loses its oldest events, never slows the
bot.

On PostgreSQL (several workers) each worker also publishes the events of its runtime on a
`LiveChannel` (`LivePublisher`; `storage.postgres.live_channel`: LISTEN/NOTIFY), whether it serves a
dashboard or not, and a dashboard served by a worker listens there too (`RemoteEvents`), so
its `/events` shows every worker's calls, trims and errors. A worker's `/metrics` count its
own events only (Prometheus scrapes every worker); a standalone dashboard keeps following the
ledger.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast, get_args

from bot.agent.events import EventBus, ModelCalled
from bot.agent.ledger import LedgerEntry
from bot.agent.ledger_file import ledger_file
from bot.agent.ledger_read import entry_from_json
from bot.agent.ledger_tail import DayFileTail
from bot.agent.ledger_trims import trim_to_json
from bot.agent.metering import ledger_entry
from bot.context.history_trimmed import HistoryTrimmed

if TYPE_CHECKING:  # prometheus-client stays unloaded in a worker that only publishes
    from bot.app.dashboard.metrics import DashboardMetrics

log = logging.getLogger("tgbot.dashboard")

EventKind = Literal["model_call", "compaction", "trim", "error"]
QUEUE_SIZE = 256
POLL_SECONDS = 0.5


class LiveChannel(Protocol):
    """Live events between worker processes (`storage.postgres.live_channel.PgLiveChannel`). A
    message is a JSON object; one published here is never delivered to this object's own
    `listen`."""

    def publish(self, message: dict[str, Any]) -> None:
        """Queue `message` for the other workers; never blocks, never raises."""
        ...

    async def listen(self, deliver: Callable[[dict[str, Any]], None]) -> None:
        """Deliver the other workers' messages until cancelled (reconnecting as needed)."""
        ...


@dataclass(frozen=True, slots=True)
class LiveEvent:
    kind: EventKind
    data: dict[str, Any]

    def sse(self) -> bytes:
        """The event in the server-sent events wire format."""
        payload = json.dumps(self.data, ensure_ascii=False, separators=(",", ":"))
        return f"event: {self.kind}\ndata: {payload}\n\n".encode()


class LiveFeed:
    """Fan-out of live events to `/events` subscribers, counted by the metrics."""

    def __init__(self, metrics: DashboardMetrics, *, trims_from_ledger: bool = True) -> None:
        self.metrics = metrics
        self.trims_from_ledger = trims_from_ledger
        self._queues: set[asyncio.Queue[LiveEvent | None]] = set()

    @property
    def subscribers(self) -> int:
        return len(self._queues)

    def subscribe(self) -> asyncio.Queue[LiveEvent | None]:
        """A queue of events; `None` means the server is shutting down."""
        queue: asyncio.Queue[LiveEvent | None] = asyncio.Queue(QUEUE_SIZE)
        self._queues.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[LiveEvent | None]) -> None:
        self._queues.discard(queue)

    def close(self) -> None:
        """End every stream (shutdown: browsers would otherwise hold it open)."""
        for queue in list(self._queues):
            self._put(queue, None)

    def publish(self, event: LiveEvent) -> None:
        for queue in list(self._queues):
            self._put(queue, event)

    @staticmethod
    def _put(queue: asyncio.Queue[LiveEvent | None], item: LiveEvent | None) -> None:
        if queue.full():
            with contextlib.suppress(asyncio.QueueEmpty):
                queue.get_nowait()
        queue.put_nowait(item)

    def on_ledger_entry(self, entry: LedgerEntry) -> None:
        """A model call was written to the ledger (a summary call is its own kind)."""
        self.metrics.observe_call(entry)
        for event in call_events(entry, with_trim=self.trims_from_ledger):
            if event.kind == "trim":
                self.metrics.observe_trim()
            self.publish(event)

    def attach(self, bus: EventBus) -> None:
        """Follow the runtime of this process (instead of the ledger tail)."""
        self.trims_from_ledger = False
        bus.on(ModelCalled, self.on_model_called)
        bus.on(HistoryTrimmed, self.on_trimmed)

    def on_model_called(self, call: ModelCalled) -> None:
        """An `EventBus` subscriber: a model call in this process, as its ledger line."""
        self.on_ledger_entry(ledger_entry(call))

    async def on_trimmed(self, event: HistoryTrimmed) -> None:
        """An `EventBus` subscriber: a trim in this process, as it happens."""
        self.metrics.observe_trim()
        self.publish(trim_event(event))


def call_events(entry: LedgerEntry, *, with_trim: bool) -> list[LiveEvent]:
    """The live events of one ledger line: the call, its error, its trim (`with_trim`)."""
    kind: EventKind = "compaction" if entry.purpose == "compaction" else "model_call"
    events = [LiveEvent(kind, _call_data(entry))]
    if entry.error is not None:
        events.append(LiveEvent("error", {**_call_data(entry), "error": entry.error}))
    if entry.trim is not None and with_trim:
        data = {
            "ts": _ts(entry),
            "chat": entry.chat,
            "session": entry.session,
            "turn_id": entry.turn_id,
            **trim_to_json(entry.trim),
        }
        events.append(LiveEvent("trim", data))
    return events


RECENT_CALLS = 20
"""Model calls the live panel shows on load, before the first event arrives."""
TAIL_BYTES = 256 * 1024
"""How much of a day file's end is read for them (a page load stays fast on a big day)."""


def recent_events(
    traces_dir: Path, days: Sequence[date], *, session: int | None = None
) -> list[dict[str, Any]]:
    """The last `RECENT_CALLS` model calls of the newest of `days` (with their errors and
    trims) as the live panel's first rows, oldest first: `{"kind", "data"}` as the feed
    sends them. Only each day file's tail is read; `session` keeps one chat's."""
    entries: list[LedgerEntry] = []
    for day in sorted(days, reverse=True):
        found = [
            entry
            for entry in _tail_entries(ledger_file(traces_dir, day))
            if session is None or entry.session == session
        ]
        entries = found + entries
        if len(entries) >= RECENT_CALLS:
            break
    return [
        {"kind": event.kind, "data": event.data}
        for entry in entries[-RECENT_CALLS:]
        for event in call_events(entry, with_trim=True)
    ]


def _tail_entries(path: Path) -> list[LedgerEntry]:
    try:
        with path.open("rb") as file:
            file.seek(0, 2)
            size = file.tell()
            file.seek(max(0, size - TAIL_BYTES))
            chunk = file.read()
    except OSError:
        return []
    lines = chunk.split(b"\n")
    if size > TAIL_BYTES:
        lines = lines[1:]  # the first is cut
    entries: list[LedgerEntry] = []
    for line in lines:
        if not line.strip():
            continue
        try:
            entries.append(entry_from_json(json.loads(line)))
        except (ValueError, TypeError, KeyError):
            continue  # a corrupt or partial line is skipped, as every reader does
    return entries


def trim_event(event: HistoryTrimmed) -> LiveEvent:
    return LiveEvent(
        "trim",
        {
            "session": event.session,
            "turn_id": event.turn_id,
            "reason": event.reason,
            "dropped_turns": event.dropped_turns,
            "dropped_messages": event.dropped_messages,
            "kept_turns": event.kept_turns,
            "tokens_before": event.tokens_before,
            "tokens_after": event.tokens_after,
            "budget": event.budget,
        },
    )


class LivePublisher:
    """Publishes this worker's runtime events on the channel, for the other workers'
    dashboards (attached in every worker on PostgreSQL, with or without a dashboard)."""

    def __init__(self, channel: LiveChannel) -> None:
        self.channel = channel

    def attach(self, bus: EventBus) -> None:
        bus.on(ModelCalled, self.on_model_called)
        bus.on(HistoryTrimmed, self.on_trimmed)

    def on_model_called(self, call: ModelCalled) -> None:
        for event in call_events(ledger_entry(call), with_trim=False):
            self.send(event)

    def on_trimmed(self, event: HistoryTrimmed) -> None:
        self.send(trim_event(event))

    def send(self, event: LiveEvent) -> None:
        self.channel.publish({"kind": event.kind, "data": event.data})


class RemoteEvents:
    """The other workers' events, from the channel into this dashboard's feed (SSE only:
    each worker's `/metrics` count its own)."""

    def __init__(self, channel: LiveChannel, feed: LiveFeed) -> None:
        self.channel = channel
        self.feed = feed

    def start_at_end(self) -> None:
        """Nothing to skip: a channel carries only what is published from now on."""

    async def run(self) -> None:
        await self.channel.listen(self.deliver)

    def deliver(self, message: dict[str, Any]) -> None:
        kind, data = message.get("kind"), message.get("data")
        if kind in _KINDS and isinstance(data, dict):
            self.feed.publish(LiveEvent(cast(EventKind, kind), data))


_KINDS: frozenset[str] = frozenset(get_args(EventKind))


def live_sources(
    feed: LiveFeed,
    *,
    bus: EventBus | None,
    channel: LiveChannel | None,
    ledger_tail: Callable[[], LedgerTail],
) -> LiveSource | None:
    """Wire the feed: inside `tgbot run` it follows the runtime (`bus`) plus, on
    PostgreSQL, the other workers (`channel`); standalone it follows the ledger."""
    if bus is None:
        return ledger_tail()
    feed.attach(bus)
    return None if channel is None else RemoteEvents(channel, feed)


def _ts(entry: LedgerEntry) -> str:
    return entry.ts.isoformat(timespec="seconds")


def _call_data(entry: LedgerEntry) -> dict[str, Any]:
    return {
        "ts": _ts(entry),
        "chat": entry.chat,
        "session": entry.session,
        "scene": entry.scene,
        "turn_id": entry.turn_id,
        "iteration": entry.iteration,
        "purpose": entry.purpose,
        "model": entry.model,
        "input_tokens": entry.input_tokens,
        "cached_tokens": entry.cached_tokens,
        "cache_write_tokens": entry.cache_write_tokens,
        "input_truncated_by_provider": entry.input_truncated_by_provider,
        "output_tokens": entry.output_tokens,
        "latency_ms": entry.latency_ms,
        "tool_calls": entry.tool_calls,
        "error": entry.error is not None,
        "call_id": entry.call_id,
        "route": entry.route or entry.provider,
        "fallback_from": entry.fallback_from,
    }


class LedgerTail:
    """Follows today's day file from its current end and hands each new line to the feed
    (through the ledger's `DayFileTail`, the reader the day index uses)."""

    def __init__(
        self,
        traces_dir: Path,
        feed: LiveFeed,
        *,
        today: Callable[[], date],
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        self.traces_dir = traces_dir
        self.feed = feed
        self._today = today
        self.poll_seconds = poll_seconds
        self._day: date | None = None
        self._file: DayFileTail | None = None

    def start_at_end(self) -> None:
        """Skip what is already written: only calls made from now on are live."""
        self._day = self._today()
        self._file = DayFileTail(ledger_file(self.traces_dir, self._day))
        self._file.skip_to_end()

    def poll(self) -> int:
        """Read what was appended since the last poll; returns how many calls it found."""
        today = self._today()
        if today != self._day or self._file is None:  # a new day file: from its start
            self._day = today
            self._file = DayFileTail(ledger_file(self.traces_dir, today))
        entries, _ = self._file.read_new()
        for entry in entries:
            self.feed.on_ledger_entry(entry)
        return len(entries)

    async def run(self) -> None:
        """Poll until cancelled; a failing read is logged and retried on the next poll."""
        while True:
            try:
                self.poll()
            except OSError:
                log.exception("could not read the ledger tail")
            await asyncio.sleep(self.poll_seconds)


LiveSource = LedgerTail | RemoteEvents
"""Where a dashboard's live events come from besides its own runtime: the ledger tail
(standalone) or the other workers (`RemoteEvents`); each can `start_at_end` and `run`."""

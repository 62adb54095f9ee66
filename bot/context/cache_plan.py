"""The cache plan of a request: which messages the next request repeats exactly.

Pure: the request's messages, the index of the current message and the read points the
shell remembered from this session's earlier requests go in; a `CachePlan` and the read
points to remember come out.

What is byte-stable, and for which next request:

- The system prompt (with the tool schemas before it on the wire) is the same on every
  request of the chat's scene: `system_end`, the last leading system message.
- The window head (the breadcrumb, and the summary right after it) stays until the window
  moves: `window_head`.
- The history before the current message is rendered the same way on every request until
  the window moves: the next iteration of this turn and the next turn both repeat it.
- The current message carries this turn's per-turn blocks (time, model, reactions, lines
  told the user). They stay on it for every iteration of this turn, and are dropped next
  turn, so from the current message on nothing is repeated by the next turn. A point ON the
  current message is never read (the next turn changes it; an iteration of this turn that
  follows always has more after it, and a point there covers it): it is never marked.
- Inside a tool loop (the request ends in tool results), the next iteration of this turn
  repeats the whole request, the assistant tool-call message and the results included:
  `last_stable` is the last tool result, read by the next iteration if the model calls a
  tool again. The request that opens a turn, the final answer at the iteration cap (it
  ends in its note) and a summary request (it ends in its instruction) end in a message
  nobody repeats: their `last_stable` is the message right before the current one (the
  summary request's current one is its instruction), the point the next turn reads.
- `previous_read`: the furthest point an earlier request of this session wrote that this
  request still repeats byte for byte, checked by a digest of the whole prefix (a moved
  window or a changed prompt fails the check: then nothing is read there and no point is
  spent on it). The shell remembers two points per request (the turn-stable point before
  the current message, and the tool-loop point when there is one), so the next turn finds
  the previous turn's point even when its last request ended in a tool loop.

See docs/architecture.md, Tokens, caches and usage as billed.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from bot.context.compaction import SUMMARY_PREFIX
from bot.domain.messages import CachePlan, ChatMessage

MAX_REMEMBERED = 4
"""Read points kept per (session, model): the newest first."""
MAX_SESSIONS = 4096
"""Sessions whose read points a `ReadPoints` keeps (the least recently used go)."""


@dataclass(frozen=True, slots=True)
class ReadPoint:
    """A prefix an earlier request ended a breakpoint at: `count` messages and their digest."""

    count: int
    digest: bytes


@dataclass(frozen=True, slots=True)
class PlannedCache:
    plan: CachePlan
    remember: tuple[ReadPoint, ...]
    """The points the next request of this session may read from (this request writes them)."""


def session_cache_key(session_id: int) -> str:
    """One opaque key per chat session (`prompt_cache_key`): a digest of the session id."""
    digest = hashlib.blake2b(f"tgbot-session:{session_id}".encode(), digest_size=12)
    return "s" + digest.hexdigest()


def _feed(digest: hashlib.blake2b, message: ChatMessage) -> None:
    parts = [
        message.role,
        message.content,
        message.tool_call_id or "",
        message.name or "",
        "\x1e".join(image.url for image in message.images),
        "\x1e".join(f"{c.id}\x1f{c.name}\x1f{c.arguments}" for c in message.tool_calls),
        "e" if message.is_error else "",
    ]
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)


def prefix_digests(messages: Sequence[ChatMessage], counts: Sequence[int]) -> dict[int, bytes]:
    """The digest of `messages[:count]` for each count (one pass, the longest prefix)."""
    wanted = set(counts)
    found: dict[int, bytes] = {}
    running = hashlib.blake2b(digest_size=16)
    if 0 in wanted:
        found[0] = running.copy().digest()
    for index, message in enumerate(messages[: max(wanted, default=0)]):
        _feed(running, message)
        if index + 1 in wanted:
            found[index + 1] = running.copy().digest()
    return found


def window_head_index(messages: Sequence[ChatMessage], system_count: int) -> int | None:
    """The breadcrumb right after the system prompt, or the summary right after it."""
    if system_count >= len(messages) or not messages[system_count].is_breadcrumb:
        return None
    after = system_count + 1
    if after < len(messages) and messages[after].content.startswith(SUMMARY_PREFIX):
        return after
    return system_count


def plan_cache(
    messages: Sequence[ChatMessage],
    *,
    current: int | None,
    previous: Sequence[ReadPoint] = (),
    session_key: str = "",
    digests: bool = True,
) -> PlannedCache:
    """The plan of a request of `messages` whose current message is `current`.

    `current` is the first message the next turn does not repeat (the one with the per-turn
    blocks; a summary request's instruction); None: the last user message. `previous` are
    the points this session's earlier requests wrote (`ReadPoints.get`). `digests` False
    (a route whose provider sends no markers: its cache is automatic) skips the prefix
    digests: no `previous_read`, nothing to remember; the positions cost nothing."""
    n = len(messages)
    if current is None:
        current = next((i for i in range(n - 1, -1, -1) if messages[i].role == "user"), n)
    system_count = 0
    while system_count < n and messages[system_count].role == "system":
        system_count += 1
    system_end = system_count - 1 if system_count else None
    head = window_head_index(messages, system_count)
    turn_stable = current - 1 if 0 < current <= n else None
    loop = n - 1 if n - 1 > current and messages[-1].role == "tool" else None
    last_stable = loop if loop is not None else turn_stable
    candidates = [p for p in previous if 0 < p.count <= n and p.count - 1 != current]
    remember_counts = [i + 1 for i in (turn_stable, loop) if i is not None]
    if not digests:
        candidates, remember_counts = [], []
    counts = [p.count for p in candidates]
    found = prefix_digests(messages, [*counts, *remember_counts])
    previous_read = None
    for point in sorted(candidates, key=lambda p: p.count, reverse=True):
        if found[point.count] == point.digest:
            previous_read = point.count - 1
            break
    plan = CachePlan(
        system_end=system_end,
        window_head=head,
        previous_read=previous_read,
        last_stable=last_stable,
        session_key=session_key,
    )
    remember = tuple(ReadPoint(c, found[c]) for c in sorted(set(remember_counts), reverse=True))
    return PlannedCache(plan=plan, remember=remember)


class ReadPoints:
    """The read points of recent sessions, per (session id, model), bounded."""

    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        self._points: OrderedDict[tuple[int, str], tuple[ReadPoint, ...]] = OrderedDict()
        self.max_sessions = max_sessions

    def get(self, session_id: int, model: str) -> tuple[ReadPoint, ...]:
        return self._points.get((session_id, model), ())

    def remember(self, session_id: int, model: str, points: Sequence[ReadPoint]) -> None:
        """Add what a request wrote; the newest points first, at most `MAX_REMEMBERED`."""
        key = (session_id, model)
        kept = [*points, *(p for p in self._points.get(key, ()) if p not in points)]
        self._points[key] = tuple(kept[:MAX_REMEMBERED])
        self._points.move_to_end(key)
        while len(self._points) > self.max_sessions:
            self._points.popitem(last=False)

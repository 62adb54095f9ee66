"""Ambient mode (`ambient = "judge"`): an unaddressed group message may be answered
(docs/groups.md, Ambient mode).

Fixed gates come first and cost nothing: never another bot's message; a burst settles (only
the newest message of a burst is considered, `settle_seconds` after it); the chat's
cooldown after the bot's last unprompted reply; its daily maximum of unprompted replies; a
chat whose budget is spent. Past them, one short judge call on the chat's `ambient_route`
reads the newest messages (at most `max_judge_tokens` of them, a hard cap) and answers
`reply` or `skip`; anything else is a skip. The call is ledgered with `purpose: judge` and
charged to the chat's budget. A `reply` schedules a normal turn answering the message, so
the answer is a turn in history like any other.

Every decision, and which gate or the judge made it, is one JSON line in
`DATA_DIR/ambient/YYYY-MM-DD.jsonl` (the dashboard's `/ambient` page reads them) and stays
in `recent` for this process.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import date, datetime, tzinfo
from pathlib import Path
from typing import Literal

from bot.agent.chat_scope import ChatScope
from bot.agent.model_call import CallReport, ModelCaller, request_needs
from bot.agent.routes import RouteTable
from bot.context.escaping import escape_member_text
from bot.context.tokens import NO_CORRECTION, estimate_text_tokens, split_request_tokens
from bot.domain.facts import InboundMessage
from bot.domain.ids import Scene
from bot.domain.messages import ChatMessage
from bot.domain.records import AssistantRecord, StoredRecord, UserRecord
from bot.errors import BotError
from bot.ports import Clock, SessionInfo
from bot.store_ports import HistoryStore

log = logging.getLogger("tgbot.ambient")

Outcome = Literal["reply", "skip"]
Schedule = Callable[[SessionInfo, InboundMessage], None]
SpentFor = Callable[[int, Scene, int | None], Awaitable[bool]]

JUDGE_PROMPT = (
    "You watch a group chat for an assistant that was not addressed. Decide whether the "
    "assistant should speak now: only when the newest message asks something it can answer "
    "usefully, or the group is clearly stuck on a fact it knows. Casual talk, greetings, "
    "jokes and messages meant for someone else are skip. Answer with one word: reply or skip."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class AmbientPolicy:
    settle_seconds: float = 10.0
    """A burst settles when nobody wrote for this long; only its newest message is judged."""
    max_judge_tokens: int = 1_200
    """The judge's whole input (instruction + messages), a hard cap (estimate)."""
    context_messages: int = 30
    """At most this many recent messages are offered to the judge (then the cap cuts)."""
    zone: tzinfo
    """The bot's time zone: the day of the daily maximum."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AmbientDecision:
    """One decision about one unaddressed message."""

    at: str
    chat: int
    thread: int
    message: int
    outcome: Outcome
    by: str
    """`bot`, `burst`, `cooldown`, `daily_max`, `budget`, `judge` or `judge_error`."""
    judge_input_tokens: int = 0


def judge_messages(
    records: Sequence[StoredRecord], *, max_tokens: int, bot_id: int | None
) -> tuple[ChatMessage, ...]:
    """The judge's request: the instruction, then the newest messages (oldest first) that
    fit `max_tokens` together with it; the newest always goes, cut to fit."""
    budget = max_tokens - estimate_text_tokens(JUDGE_PROMPT) - 16
    lines: list[str] = []
    for record in reversed(records):
        body = record.body
        if isinstance(body, UserRecord) and body.sender.kind == "bot":
            continue  # another bot's words never reach the judge
        if isinstance(body, UserRecord):
            who = escape_member_text(" ".join(body.sender.name.split()))[:40]
            said = escape_member_text(" ".join(body.text.split()))
        elif isinstance(body, AssistantRecord) and body.text:
            who, said = "assistant", " ".join(body.text.split())
        else:
            continue
        line = f"{who}: {said}"
        cost = estimate_text_tokens(line) + 1
        if cost > budget:
            if not lines:  # the newest message, cut to what is left
                while line and estimate_text_tokens(line) + 1 > budget:
                    line = line[: max(0, len(line) * 3 // 4)]
                if line:
                    lines.append(line + "…")
            break
        budget -= cost
        lines.append(line)
    lines.reverse()
    transcript = "\n".join(lines) if lines else "(nothing readable)"
    _ = bot_id
    return (
        ChatMessage(role="system", content=JUDGE_PROMPT),
        ChatMessage(role="user", content=f"{transcript}\n\nreply or skip?"),
    )


def verdict_of(text: str) -> Outcome:
    """`reply` only when the answer is that word (any case, punctuation around it)."""
    words = text.strip().strip(".!\"'`*").lower().split()
    return "reply" if words == ["reply"] else "skip"


class AmbientListener:
    """Decides, per unaddressed group message, whether the bot speaks (see the module)."""

    def __init__(
        self,
        *,
        history: HistoryStore,
        routes: RouteTable,
        caller: ModelCaller,
        clock: Clock,
        policy: AmbientPolicy,
        log_dir: Path | None = None,
        spent_for: SpentFor | None = None,
    ) -> None:
        self.history = history
        self.routes = routes
        self.caller = caller
        self.clock = clock
        self.policy = policy
        self.log_dir = log_dir
        self.spent_for = spent_for
        self.recent: deque[AmbientDecision] = deque(maxlen=500)
        self._pending: dict[int, tuple[asyncio.Task[None], InboundMessage]] = {}
        self._last_reply: dict[int, datetime] = {}
        self._replies: dict[tuple[int, date], int] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def heard(
        self, session: SessionInfo, message: InboundMessage, scope: ChatScope, schedule: Schedule
    ) -> None:
        """A stored, unaddressed group message of a chat in ambient mode."""
        if message.sender.kind == "bot" or message.sender.is_bot:
            self.record(message, "skip", "bot")
            return
        earlier = self._pending.pop(session.id, None)
        if earlier is not None:
            earlier[0].cancel()
            self.record(earlier[1], "skip", "burst")
        task = asyncio.create_task(self._settle_then_decide(session, message, scope, schedule))
        self._pending[session.id] = (task, message)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        self._pending.clear()

    async def _settle_then_decide(
        self, session: SessionInfo, message: InboundMessage, scope: ChatScope, schedule: Schedule
    ) -> None:
        await asyncio.sleep(self.policy.settle_seconds)
        if self._pending.get(session.id, (None, None))[1] is message:
            del self._pending[session.id]
        try:
            if await self.decide(session, message, scope) == "reply":
                schedule(session, message)
        except Exception:
            log.exception("ambient decision in chat %s failed", message.chat_id)

    async def decide(
        self, session: SessionInfo, message: InboundMessage, scope: ChatScope
    ) -> Outcome:
        triggers = scope.triggers
        chat = message.chat_id
        now = self.clock.now()
        day = now.astimezone(self.policy.zone).date()
        last = self._last_reply.get(chat)
        if last is not None and (now - last).total_seconds() < triggers.ambient_cooldown_seconds:
            return self.record(message, "skip", "cooldown")
        if self._replies.get((chat, day), 0) >= triggers.ambient_daily_max:
            return self.record(message, "skip", "daily_max")
        if self.spent_for is not None and await self.spent_for(chat, "group", None):
            return self.record(message, "skip", "budget")
        try:
            outcome, tokens = await self.judge(session, scope)
        except (BotError, OSError) as exc:
            log.warning("ambient judge in chat %s failed: %s", chat, exc)
            return self.record(message, "skip", "judge_error")
        if outcome == "reply":
            self._last_reply[chat] = now
            self._replies[(chat, day)] = self._replies.get((chat, day), 0) + 1
        return self.record(message, outcome, "judge", tokens)

    async def judge(self, session: SessionInfo, scope: ChatScope) -> tuple[Outcome, int]:
        """One judge call over the newest messages; (its verdict, its input estimate)."""
        loaded = await self.history.load_history(
            session.id, max_records=self.policy.context_messages
        )
        records = loaded.records[-self.policy.context_messages :]
        messages = judge_messages(records, max_tokens=self.policy.max_judge_tokens, bot_id=None)
        route = self.routes.resolve(scope.triggers.ambient_route or session.route or scope.route)
        needs = request_needs(messages, (), route, NO_CORRECTION)
        tokens = split_request_tokens(messages, len(messages) - 1)
        report = CallReport(
            session=session,
            turn_id=f"judge-{self.clock.now():%H%M%S%f}",
            tokens=tokens,
            fixed_tokens=estimate_text_tokens(JUDGE_PROMPT),
            purpose="judge",
        )
        response = await self.caller.send(
            route,
            messages,
            tools=(),
            needs=needs,
            report=report,
            current=None,
            max_output_tokens=16,
        )
        return verdict_of(response.text), needs.total

    def record(
        self, message: InboundMessage, outcome: Outcome, by: str, tokens: int = 0
    ) -> Outcome:
        decision = AmbientDecision(
            at=self.clock.now().isoformat(timespec="seconds"),
            chat=message.chat_id,
            thread=message.thread_id,
            message=message.message_id,
            outcome=outcome,
            by=by,
            judge_input_tokens=tokens,
        )
        self.recent.append(decision)
        log.info(
            "ambient %s in chat %s (m%s): %s", outcome, message.chat_id, message.message_id, by
        )
        if self.log_dir is not None:
            try:
                self.log_dir.mkdir(parents=True, exist_ok=True)
                path = self.log_dir / f"{self.clock.now():%Y-%m-%d}.jsonl"
                with path.open("a", encoding="utf-8") as file:
                    file.write(json.dumps(asdict(decision), ensure_ascii=False) + "\n")
            except OSError as exc:
                log.warning("ambient decision not logged: %s", exc)
        return outcome


def read_decisions(log_dir: Path, *, limit: int = 200) -> list[dict[str, object]]:
    """The newest decisions logged in `log_dir` (newest first), for the dashboard."""
    found: list[dict[str, object]] = []
    if not log_dir.is_dir():
        return found
    for path in sorted(log_dir.glob("*.jsonl"), reverse=True):
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError:
            continue
        for line in reversed(lines):
            try:
                item = json.loads(line)
            except ValueError:
                continue
            if isinstance(item, dict):
                found.append(item)
            if len(found) >= limit:
                return found
    return found

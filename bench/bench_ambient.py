"""Ambient mode on a busy group: a 1,000-message day replayed through the real gates and the
real judge call (`bot.services.ambient`), reporting judge calls, input per judged message,
cost and unprompted replies.

The group: 40 members over 14 hours, messages in bursts (a member often sends 2-4 in a row
seconds apart), one in eight a question. The judge is a scripted cheap model that says
`reply` to a question and `skip` to the rest (the worst case for the gates: every question
wants an answer), priced like a small hosted model (0.14 per million input tokens, 0.28 per
million output). Time is simulated: a message ends a burst when the next message of the
chat comes `settle_seconds` or more after it; only those reach the gates.

    python -m bench.bench_ambient [--messages 1000] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from adapters.llm.scripted import ScriptedModel
from bot.agent.chat_scope import ChatScope, TriggerRules
from bot.agent.events import EventBus, ModelCalled
from bot.agent.model_call import ModelCaller
from bot.agent.routes import Prices, ProfileEntry, RouteTable
from bot.context.window import ProfileCapacity, RuntimeLimits
from bot.domain.facts import InboundMessage, Sender
from bot.domain.ids import SessionKey
from bot.domain.records import StoredRecord, UserRecord
from bot.ports import LLMRequest, LLMResponse, LoadedHistory, SessionInfo
from bot.services.ambient import AmbientListener, AmbientPolicy

CHAT = -1005550000048
PRICES = Prices(input_per_mtok=0.14, output_per_mtok=0.28)
WORDS = (
    "ok",
    "sure",
    "lol",
    "the",
    "build",
    "is",
    "green",
    "again",
    "who",
    "took",
    "the",
    "last",
    "coffee",
    "meeting",
    "moved",
    "to",
    "three",
    "pushed",
    "a",
    "fix",
    "lunch",
    "anyone",
    "nice",
    "weather",
    "today",
    "the",
    "demo",
    "went",
    "well",
    "see",
    "the",
    "doc",
    "I",
    "will",
    "check",
    "later",
    "thanks",
    "all",
    "good",
    "night",
    "好的",
    "收到",
    "我看看",
    "明天再说",
    "哈哈",
)
QUESTIONS = (
    "does anyone know how to rotate the staging keys?",
    "what was the command to rebuild the index?",
    "when is the release?",
    "why does the CI fail on arm64?",
    "有人知道怎么重置密码吗?",
)


@dataclass
class Clock:
    now_at: datetime

    def now(self) -> datetime:
        return self.now_at


class History:
    """The chat's stored messages, as `load_history` gives them to the judge."""

    def __init__(self, session: SessionInfo) -> None:
        self.session = session
        self.records: list[StoredRecord] = []

    def add(self, message: InboundMessage) -> None:
        body = UserRecord(sender=message.sender, text=message.text)
        record = StoredRecord(
            id=len(self.records) + 1,
            session_id=self.session.id,
            parent_id=len(self.records) or None,
            created_at=message.date,
            body=body,
            message_ids=(message.message_id,),
        )
        self.records.append(record)

    async def load_history(self, session_id: int, *, max_records: int) -> LoadedHistory:
        tail = tuple(self.records[-max_records:])
        return LoadedHistory(
            session=self.session,
            records=tail,
            has_earlier=len(self.records) > len(tail),
            next_alias_seq=len(self.records) + 1,
        )


def busy_day(messages: int, seed: int = 48) -> list[InboundMessage]:
    rng = random.Random(seed)
    start = datetime(2026, 12, 7, 8, 0, tzinfo=UTC)
    span = 14 * 3600
    out: list[InboundMessage] = []
    at = 0.0
    while len(out) < messages:
        at += rng.expovariate(messages / span) * rng.choice((1, 1, 1, 2.5))
        member = rng.randrange(40)
        for _ in range(rng.choice((1, 1, 1, 2, 3, 4))):
            if len(out) >= messages:
                break
            if rng.random() < 1 / 8:
                text = rng.choice(QUESTIONS)
            else:
                text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 14)))
            out.append(
                InboundMessage(
                    update_id=len(out) + 1,
                    chat_id=CHAT,
                    chat_type="supergroup",
                    message_id=len(out) + 1,
                    date=start + timedelta(seconds=at),
                    sender=Sender(id=1000 + member, name=f"Member{member}"),
                    text=text,
                )
            )
            at += rng.uniform(1, 6)
    return out


def judge(request: LLMRequest) -> LLMResponse:
    transcript = str(request.messages[-1].content).split("\n\nreply or skip?")[0]
    return LLMResponse(text="reply" if transcript.rstrip().endswith("?") else "skip")


async def replay(messages: list[InboundMessage], *, settle: float = 10.0) -> dict[str, Any]:
    clock = Clock(messages[0].date)
    session = SessionInfo(id=1, key=SessionKey(chat_id=CHAT), scene="group")
    history = History(session)
    model = ScriptedModel(default=judge, keep_requests=False)
    routes = RouteTable(
        {
            "cheap": ProfileEntry(
                provider=model, capacity=ProfileCapacity(name="cheap"), prices=PRICES
            )
        },
        default_profile="cheap",
        default_model="cheap-judge",
    )
    bus = EventBus()
    calls: list[ModelCalled] = []

    async def seen(call: ModelCalled) -> None:
        calls.append(call)

    bus.on(ModelCalled, seen)
    caller = ModelCaller(bus=bus, clock=clock, limits=RuntimeLimits())
    listener = AmbientListener(
        history=history,  # type: ignore[arg-type]  # the judge reads load_history only
        routes=routes,
        caller=caller,
        clock=clock,
        policy=AmbientPolicy(settle_seconds=settle, zone=UTC),
    )
    listener.recent = deque()  # every decision of the day, not the newest 500
    scope = ChatScope(triggers=TriggerRules(ambient="judge"))
    for index, message in enumerate(messages):
        history.add(message)
        clock.now_at = message.date
        following = messages[index + 1] if index + 1 < len(messages) else None
        if following is not None and (following.date - message.date).total_seconds() < settle:
            listener.record(message, "skip", "burst")
            continue
        clock.now_at = message.date + timedelta(seconds=settle)
        await listener.decide(session, message, scope)
    decisions = list(listener.recent)
    judged = [d.judge_input_tokens for d in decisions if d.by == "judge"]
    by: dict[str, int] = {}
    for decision in decisions:
        key = decision.by if decision.by != "judge" else f"judge:{decision.outcome}"
        by[key] = by.get(key, 0) + 1
    cost = sum(PRICES.cost(c.usage) for c in calls if c.usage is not None)
    return {
        "messages": len(messages),
        "judge_calls": len(calls),
        "judged_share": round(len(calls) / len(messages), 4),
        "input_per_judged_p50": int(statistics.median(judged)) if judged else 0,
        "input_per_judged_max": max(judged, default=0),
        "cost": round(cost, 6),
        "replies": by.get("judge:reply", 0),
        "decided_by": dict(sorted(by.items())),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_ambient")
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = asyncio.run(replay(busy_day(args.messages)))
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for key, value in result.items():
        print(f"{key:>22}: {value}")


if __name__ == "__main__":
    main()

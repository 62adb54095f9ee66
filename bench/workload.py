"""A seeded group-chat workload shaped like the ADR's real trace (seeds/003, "背景").

The trace: a group session whose stored user messages averaged ~4,350 characters, of which
the member actually said ~26; the rest was per-turn context replayed with every old message:
[Turn context] 879, [Already told the user] 353, skill notes ~1,000, workspace rules 2,504,
deferred tool index 2,922. Here: several people talk (Chinese and English, short messages
with a long tail), ~40 % of the messages address the bot, some turns use tools whose outputs
run from 100 to 20,000 characters, and some messages quote recent or old messages.

`generate(size, seed)` is pure: the same arguments give the same workload, byte for byte.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from bot.domain.facts import Sender

BOT_NAME = "Helper"
BOT_ID = 999
CHAT_ID = -1001987654321
START = datetime(2026, 10, 28, 1, 0, tzinfo=UTC)

TURN_CONTEXT_CHARS = 879
TOLD_CHARS = 353
SKILL_CHARS = 1_000
RULES_CHARS = 2_504
TOOL_INDEX_CHARS = 2_922
PER_TURN_CHARS = TURN_CONTEXT_CHARS + TOLD_CHARS + SKILL_CHARS + RULES_CHARS + TOOL_INDEX_CHARS

PEOPLE = (
    Sender(id=1001, name="Alice"),
    Sender(id=1002, name="王磊"),
    Sender(id=1003, name="Chen Yu"),
    Sender(id=1004, name="小林"),
    Sender(id=1005, name="Bob"),
)

_ZH_WORDS = (
    "我们 今天 这个 版本 发布 测试 一下 看看 好像 有点 问题 已经 修好 了 吗 构建 失败 "
    "日志 服务器 部署 回滚 配置 文件 数据库 迁移 会议 改到 周五 下午 谁 负责 需求 文档 "
    "接口 超时 重试 缓存 命中 模型 上下文 窗口 太长 引用 消息 机器人 帮我 总结 一下 "
    "昨天 讨论 的 结论 是 什么 先 别 合并 等 审核 通过 再说 好的 收到 没问题 谢谢"
)
_ZH = _ZH_WORDS.split()
_EN_WORDS = (
    "the build is red again can someone check logs deploy rollback config database "
    "migration meeting moved to friday who owns this ticket docs api timeout retry cache "
    "hit model context window too long quote message bot please summarise what did we "
    "decide yesterday do not merge yet wait for review ok thanks sure sounds good lgtm "
    "ship it tomorrow staging prod hotfix branch rebase conflict tests pass flaky"
)
_EN = _EN_WORDS.split()
_CODE = (
    "def load(path): return json.loads(Path(path).read_text())",
    "ERROR 2026-10-28T03:14:07Z worker-3 timeout after 30000 ms (retry 2/5)",
    "INFO  request_id=7f3a9c status=200 latency_ms=183 route=/v1/chat/completions",
    '  File "/srv/app/agent/loop.py", line 218, in run_turn',
    "SELECT id, parent_id, payload FROM agent_messages WHERE session_id = ? ORDER BY id",
    "git log --oneline -n 5 | cat",
    "| 指标 | 现在 | 目标 |",
    "warning: 3 files changed, 41 insertions(+), 12 deletions(-)",
)


def _words(rng: random.Random, chars: int, *, zh_share: float) -> str:
    """About `chars` characters of chat-like text; Chinese words joined tight, English spaced."""
    out: list[str] = []
    size = 0
    while size < chars:
        if rng.random() < zh_share:
            word = rng.choice(_ZH)
            out.append(word)
            size += len(word)
        else:
            word = rng.choice(_EN)
            out.append(" " + word)
            size += len(word) + 1
    return "".join(out).strip()[:chars]


def _block(rng: random.Random, chars: int, *, zh_share: float, code_share: float) -> str:
    """Multi-line text of exactly `chars` characters: prose, list items and code-ish lines."""
    lines: list[str] = []
    size = 0
    while size < chars:
        pick = rng.random()
        if pick < code_share:
            line = rng.choice(_CODE)
        elif pick < code_share + 0.3:
            line = "- " + _words(rng, rng.randint(30, 90), zh_share=zh_share)
        else:
            line = _words(rng, rng.randint(40, 140), zh_share=zh_share)
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)[:chars]


@dataclass(frozen=True, slots=True, kw_only=True)
class QuoteOf:
    """A quote of an earlier message of the workload (by index)."""

    target: int
    recent: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatEvent:
    """One inbound message; `tool_outputs` (sizes in characters, one per model iteration)
    and `reply` are what the bot's turn does when the message addresses it."""

    index: int
    message_id: int
    at: datetime
    sender: Sender
    text: str
    addressed: bool
    quote: QuoteOf | None = None
    tool_outputs: tuple[int, ...] = ()
    reply: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class PerTurnTexts:
    """The stable per-turn blocks (same for every turn) and the tool-index versions."""

    skill_notes: str
    workspace_rules: str
    tool_indexes: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    seed: int
    events: tuple[ChatEvent, ...]
    per_turn: PerTurnTexts

    @property
    def turns(self) -> int:
        return sum(1 for e in self.events if e.addressed)

    @property
    def tool_calls(self) -> int:
        return sum(len(e.tool_outputs) for e in self.events)

    @property
    def quoted_turns(self) -> int:
        return sum(1 for e in self.events if e.addressed and e.quote is not None)

    def turn_context(self, event: ChatEvent, turn: int) -> str:
        """The legacy [Turn context] block at `event` (its time line changes every turn)."""
        rng = random.Random(self.seed * 7919 + event.index)
        head = "\n".join(
            [
                "[Turn context]",
                f"time: {event.at:%Y-%m-%d %H:%M:%S}.{event.at.microsecond // 1000:03d} UTC",
                "model: deepseek-chat (fallback: qwen-plus)",
                f"git: branch main @ {rng.getrandbits(40):010x}, {rng.randint(0, 9)} dirty",
                "language: zh-CN (fallback en)",
                "command prefix: /",
                f"turn: {turn}; scene: group; chat: {CHAT_ID}",
            ]
        )
        tail = _block(rng, TURN_CONTEXT_CHARS, zh_share=0.15, code_share=0.2)
        return (head + "\n" + tail)[:TURN_CONTEXT_CHARS]

    def told_user(self, event: ChatEvent) -> str:
        rng = random.Random(self.seed * 104729 + event.index)
        text = "[Already told the user]\n" + _block(rng, TOLD_CHARS, zh_share=0.6, code_share=0)
        return text[:TOLD_CHARS]

    def tool_index(self, turn: int) -> str:
        """The deferred tool index: a new version every 25 turns (the tool set changed)."""
        versions = self.per_turn.tool_indexes
        return versions[min(turn // 25, len(versions) - 1)]


def _user_text(rng: random.Random) -> str:
    """~26 characters on average with a long tail (a few messages run to hundreds)."""
    length = max(2, min(int(rng.lognormvariate(math.log(14), 0.95)), 1_200))
    return _words(rng, length, zh_share=0.5 if rng.random() < 0.6 else 0.1)


def _tool_size(rng: random.Random) -> int:
    """Log-uniform between 100 and 20,000 characters."""
    return int(math.exp(rng.uniform(math.log(100), math.log(20_000))))


def generate(
    size: int = 400,
    seed: int = 43,
    *,
    addressed_share: float = 0.4,
    tool_share: float = 0.35,
    quote_share: float = 0.15,
) -> Workload:
    """`size` inbound messages of one group chat; deterministic in (`size`, `seed`)."""
    rng = random.Random(seed)
    events: list[ChatEvent] = []
    at = START
    for index in range(size):
        gap = rng.expovariate(1 / 40) if rng.random() < 0.9 else rng.uniform(300, 3_600)
        at += timedelta(seconds=gap, milliseconds=rng.randint(0, 999))
        sender = PEOPLE[min(int(rng.paretovariate(1.2)) - 1, len(PEOPLE) - 1)]
        addressed = rng.random() < addressed_share
        text = _user_text(rng)
        if addressed:
            text = f"@{BOT_NAME} {text}"
        quote = None
        if index > 0 and rng.random() < quote_share:
            recent = rng.random() < 0.6
            lo = max(0, index - 8) if recent else 0
            hi = index - 1 if recent else max(0, index - 60)
            quote = QuoteOf(target=rng.randint(lo, max(lo, hi)), recent=recent)
        outputs: tuple[int, ...] = ()
        reply = ""
        if addressed:
            if rng.random() < tool_share:
                iterations = 1 + (rng.random() < 0.4) + (rng.random() < 0.2)
                outputs = tuple(_tool_size(rng) for _ in range(iterations))
            reply = _words(rng, rng.randint(30, 420), zh_share=0.55)
        events.append(
            ChatEvent(
                index=index,
                message_id=700_000 + index * 3,
                at=at,
                sender=sender,
                text=text,
                addressed=addressed,
                quote=quote,
                tool_outputs=outputs,
                reply=reply,
            )
        )
    fixed = random.Random(seed * 31 + 1)
    per_turn = PerTurnTexts(
        skill_notes=_block(fixed, SKILL_CHARS, zh_share=0.4, code_share=0.15),
        workspace_rules=_block(fixed, RULES_CHARS, zh_share=0.35, code_share=0.2),
        tool_indexes=tuple(
            _tool_index_text(random.Random(seed * 131 + v), TOOL_INDEX_CHARS) for v in range(8)
        ),
    )
    return Workload(seed=seed, events=tuple(events), per_turn=per_turn)


def _tool_index_text(rng: random.Random, chars: int) -> str:
    lines: list[str] = []
    size = 0
    while size < chars:
        name = "_".join(rng.choice(_EN) for _ in range(2))
        line = f"- {name}(query, limit?) — " + _words(rng, rng.randint(40, 90), zh_share=0.1)
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)[:chars]


def tool_output(seed: int, call: int, chars: int) -> str:
    """The text a bench tool returns: logs, code and prose, exactly `chars` characters."""
    return _block(random.Random(seed * 65537 + call), chars, zh_share=0.3, code_share=0.5)


def quote_summary(text: str) -> tuple[str, bool]:
    """The one-line summary the reference port stores (≤ 120 characters) and `truncated`."""
    line = " ".join(text.split())
    return line[:120], len(line) > 120

"""Memory facts and the per-turn `[Memory]` block that shows them (docs/architecture.md, Memory).

A fact is what the model kept on purpose (`remember`): about one member of one chat, or about
the chat itself. The block rides on the current message only, like `[Turn context]`, so a new
or forgotten fact never changes the cached prefix. It holds the triggering member's facts in
this chat first, then the chat's, each newest first, and stops at the first fact that would
pass `max_tokens`. Who may see which fact is decided by what the caller passes in (the store
reads facts by chat and member); this module only renders them.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

from bot.context.escaping import inline_value
from bot.context.tokens import estimate_text_tokens

CHAT_WIDE = 0
"""The member id of a fact about the chat itself (Telegram user ids are positive)."""

MEMORY_MARKER = "[Memory]"


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryLimits:
    """`[memory]`: the block's token bound, the caps per member and per chat (in one chat),
    and the longest fact."""

    max_tokens: int = 400
    per_member: int = 50
    per_chat: int = 100
    max_fact_chars: int = 300


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryFact:
    """One kept fact: `member_id` is whom it is about (`CHAT_WIDE` for the chat itself),
    `author_id` who had it kept."""

    id: int
    chat_id: int
    member_id: int
    author_id: int
    text: str
    created_at: datetime

    @property
    def alias(self) -> str:
        return fact_alias(self.id)

    @property
    def about_chat(self) -> bool:
        return self.member_id == CHAT_WIDE


def fact_alias(fact_id: int) -> str:
    return f"f{fact_id}"


def parse_fact_alias(text: str) -> int | None:
    """`f12` (or `F12`, or `12`) → 12; None for anything else."""
    value = text.strip()
    if value[:1] in ("f", "F"):
        value = value[1:]
    if not value.isascii() or not value.isdigit() or len(value) > 18:
        return None
    number = int(value)
    return number if number > 0 else None


def fact_line(fact: MemoryFact) -> str:
    """`- f3: vegetarian` on one line: the fact is member-derived text inside our block."""
    return f"- {fact.alias}: {inline_value(' '.join(fact.text.split()))}"


def render_memory_block(
    facts: Sequence[MemoryFact], *, member_id: int | None, max_tokens: int
) -> str:
    """The `[Memory]` block for a turn that `member_id` triggered (None: no member did, so
    only the chat's facts), from `facts` of this chat (any order); "" when none is shown."""
    mine = sorted(
        (f for f in facts if member_id is not None and f.member_id == member_id),
        key=lambda f: f.id,
        reverse=True,
    )
    chats = sorted((f for f in facts if f.about_chat), key=lambda f: f.id, reverse=True)
    header_mine = f"about the member user_id:{member_id} (here only):"
    header_chat = "about this chat:"
    used = estimate_text_tokens(MEMORY_MARKER)
    lines: list[str] = [MEMORY_MARKER]
    for header, group in ((header_mine, mine), (header_chat, chats)):
        if not group:
            continue
        cost = estimate_text_tokens(header)
        taken: list[str] = []
        for fact in group:
            line = fact_line(fact)
            line_cost = estimate_text_tokens(line)
            if used + cost + line_cost > max_tokens:
                break
            cost += line_cost
            taken.append(line)
        if taken:
            used += cost
            lines += [header, *taken]
        if len(taken) < len(group):
            break  # the budget is spent: the chat's facts never push out the member's
    return "\n".join(lines) if len(lines) > 1 else ""


def without_facts(blocks: str, fact_ids: Collection[int]) -> str:
    """The per-turn `blocks` with the lines of `fact_ids` left out of their `[Memory]` block
    (forgotten during the turn: its next calls show them no more); a header left with no
    line goes too, and the block when it is empty."""
    start = blocks.find(MEMORY_MARKER)
    if start < 0 or not fact_ids or (start and blocks[start - 2 : start] != "\n\n"):
        return blocks
    end = blocks.find("\n\n", start)
    end = len(blocks) if end < 0 else end
    gone = {f"- {fact_alias(i)}:" for i in fact_ids}
    kept = [line for line in blocks[start:end].split("\n") if not line.startswith(tuple(gone))]
    # a header (`about …:`) followed by another header or by nothing has no line left
    lines = [
        line
        for n, line in enumerate(kept)
        if line.startswith("- ") or n == 0 or (n + 1 < len(kept) and kept[n + 1].startswith("- "))
    ]
    block = "\n".join(lines) if len(lines) > 1 else ""
    before, after = blocks[:start], blocks[end:]
    if not block:
        before = before[:-2] if before.endswith("\n\n") else before
        after = after[2:] if not before and after.startswith("\n\n") else after
    return before + block + after


def shown_fact_ids(content: str) -> tuple[str, ...]:
    """The fact aliases the `[Memory]` block in a current message's `content` shows, in order
    (what a call's trace says it saw)."""
    start = content.find(f"\n\n{MEMORY_MARKER}\n")
    if start < 0:
        if not content.startswith(MEMORY_MARKER + "\n"):
            return ()
        start = -2
    block = content[start + 2 :].split("\n\n", 1)[0]
    return tuple(
        line[2 : line.index(":")]
        for line in block.splitlines()[1:]
        if line.startswith("- f") and ":" in line
    )

"""Compaction, the pure part: what departs, the summary request, the block.

When the window start moves forward, the turns that left are folded into a rolling summary
of the session. This module decides nothing asynchronous; `bot.agent.compactor` calls the
model and stores the result. Here:

- `summary_message`: the summary as the model sees it, right after the breadcrumb, a
  user-role message whose text is member-derived and therefore escaped:
  `[Summary of earlier conversation m1–m230]` then the text.
- `summary_request`: the messages of the summary call, the chat's last reply request (same
  system prompt, breadcrumb, summary and window, in the same order) plus one final
  instruction naming the turns to fold, so a warm provider cache serves most of it.
- `new_summary`: the model's answer bounded to the scene's summary budget, with the range it
  covers and the aliases it mentions (they join the turn's alias table).
- `extractive_summary`: the offline model's deterministic summary (demo and tests).

When a call folds (and which summary it shows) is `bot.context.window_plan`'s.

See docs/context-window.md, The summary.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bot.context.escaping import escape_member_text
from bot.context.tokens import estimate_text_tokens, with_token_estimate
from bot.domain.messages import ChatMessage
from bot.domain.records import StoredRecord, SummaryRecord

SUMMARY_TITLE = "[Summary of earlier conversation {first}–{last}]"
SUMMARY_PREFIX = "[Summary of earlier conversation"
INSTRUCTION_MARKER = "[Compaction request]"
FOLD_LINE = "fold: {first}–{last}; at most {tokens} tokens"

_ALIAS = re.compile(r"(?<![\w.])m\d+(?:\.\d+)?(?![\w])")
_FOLD = re.compile(r"^fold: (\S*)–(m\d+(?:\.\d+)?); at most (\d+) tokens$", re.MULTILINE)
_HEADER = re.compile(r"^\[((?:[a-z_]+:[^;\]\n]*;)+)\]$")


def summary_title(record: SummaryRecord) -> str:
    first = record.first_alias or "?"
    last = record.last_alias or "?"
    return SUMMARY_TITLE.format(first=first, last=last)


def summary_message(record: SummaryRecord) -> ChatMessage:
    """The summary block: its title (written by the system) and the escaped text."""
    text = escape_member_text(record.text)
    content = "\n".join(part for part in (summary_title(record), text) if part)
    return with_token_estimate(ChatMessage(role="user", content=content))


def fold_instruction(first: str, last: str, max_tokens: int) -> str:
    """The final instruction of a summary request (system-written, so not escaped)."""
    return "\n".join(
        [
            INSTRUCTION_MARKER,
            FOLD_LINE.format(first=first or "start", last=last, tokens=max_tokens),
            "The oldest part of this conversation is about to leave your context. Write the "
            f"summary of earlier conversation up to and including {last}: fold the previous "
            "summary (if there is one) and every message up to that one into a single "
            f"summary of at most {max_tokens} tokens. Keep who said what, decisions, open "
            "questions, promises and facts people will ask about again; name messages by "
            "their id (such as m12) where it helps. Reply with the summary text only, in the "
            "conversation's language; do not call tools and do not address anyone.",
        ]
    )


def summary_request(
    messages: Sequence[ChatMessage], *, first: str, last: str, max_tokens: int
) -> list[ChatMessage]:
    """`messages` (the reply request as the chat last saw it) plus the fold instruction."""
    instruction = ChatMessage(role="user", content=fold_instruction(first, last, max_tokens))
    return [*messages, with_token_estimate(instruction)]


def alias_range(records: Iterable[StoredRecord]) -> tuple[str, str]:
    """The first and last alias shown by `records` ("" when none has one)."""
    first = last = ""
    for record in records:
        for alias in record.alias_parts:
            if alias is None:
                continue
            if not first:
                first = alias
            last = alias
    return first, last


def mentioned_aliases(text: str) -> list[str]:
    """Aliases (`m12`, `m7.3`) in `text`, first mention order, each once."""
    seen: dict[str, None] = {}
    for match in _ALIAS.finditer(text):
        seen.setdefault(match.group(0), None)
    return list(seen)


def bound_summary(text: str, max_tokens: int) -> str:
    """`text` cut to at most `max_tokens` (our estimate), at a line or word end when it can."""
    text = text.strip()
    if estimate_text_tokens(text) <= max_tokens:
        return text
    low, high = 0, len(text)
    while low < high:  # the longest prefix that fits, with room for the ellipsis
        mid = (low + high + 1) // 2
        if estimate_text_tokens(text[:mid]) + 1 <= max_tokens:
            low = mid
        else:
            high = mid - 1
    cut = text[:low]
    for stop in ("\n", " "):
        at = cut.rfind(stop)
        if at > low // 2:
            cut = cut[:at]
            break
    return cut.rstrip() + "…"


@dataclass(frozen=True, slots=True, kw_only=True)
class FoldPlan:
    """What one summary call folds: the range it will cover and the instruction's words."""

    first: str
    last: str
    max_tokens: int


def plan_fold(
    departing: Sequence[StoredRecord], previous: SummaryRecord | None, max_tokens: int
) -> FoldPlan | None:
    """The fold of `departing` (the records leaving the window, oldest first) on top of
    `previous`; None when nothing departing has an alias to name."""
    first, last = alias_range(departing)
    if not last:
        return None
    if previous is not None and previous.first_alias:
        first = previous.first_alias
    return FoldPlan(first=first, last=last, max_tokens=max_tokens)


def new_summary(
    text: str,
    *,
    plan: FoldPlan,
    departing: Sequence[StoredRecord],
    previous: SummaryRecord | None,
) -> SummaryRecord | None:
    """The summary record from the model's answer; None when the answer is empty."""
    bounded = bound_summary(text, plan.max_tokens)
    if not bounded:
        return None
    known: dict[str, int] = dict(previous.aliases) if previous is not None else {}
    for record in departing:
        for alias, message_id in zip(record.alias_parts, record.message_ids, strict=False):
            if alias is not None and message_id is not None:
                known.setdefault(alias, message_id)
    aliases = tuple((a, known[a]) for a in mentioned_aliases(bounded) if a in known)
    return SummaryRecord(
        text=bounded, first_alias=plan.first, last_alias=plan.last, aliases=aliases
    )


def _header_fields(line: str) -> dict[str, str] | None:
    match = _HEADER.match(line)
    if match is None:
        return None
    fields: dict[str, str] = {}
    for part in match.group(1).split(";"):
        key, sep, value = part.partition(":")
        if sep:
            fields[key] = value
    return fields


def _alias_number(alias: str) -> tuple[int, int]:
    head, _, slot = alias[1:].partition(".")
    return int(head), int(slot or 0)


def extractive_summary(messages: Sequence[ChatMessage], *, line_chars: int = 60) -> str:
    """A deterministic summary for the offline model: one line per message up to the fold's
    last alias (`m12 Alice: first words…`), after the previous summary's lines, keeping the
    newest lines that fit the bound the instruction names."""
    instruction = next(
        (m.content for m in reversed(messages) if m.content.startswith(INSTRUCTION_MARKER)), ""
    )
    fold = _FOLD.search(instruction)
    if fold is None:
        return ""
    last = _alias_number(fold.group(2))
    budget = int(fold.group(3))
    lines: list[str] = []
    names: dict[str, str] = {}
    for message in messages:
        if message.content.startswith(INSTRUCTION_MARKER):
            continue
        if message.role == "user" and message.content.startswith(SUMMARY_PREFIX):
            lines.extend(line for line in message.content.split("\n")[1:] if line.strip())
            continue
        if message.role not in ("user", "assistant") or not message.content:
            continue
        head, _, body = message.content.partition("\n")
        fields = _header_fields(head)
        if fields is None:
            continue
        alias = fields.get("id") or fields.get("parts", "").split(",")[0]
        if not _ALIAS.fullmatch(alias) or _alias_number(alias) > last:
            continue
        if "user_id" in fields and "user" in fields:
            names[fields["user_id"]] = fields["user"]
        who = "bot" if message.role == "assistant" else names.get(fields.get("user_id", ""), "")
        who = who or fields.get("user_id", "?")
        text = " ".join(body.split("\n\n[", 1)[0].split())
        if len(text) > line_chars:
            text = text[: line_chars - 1] + "…"
        lines.append(f"{alias} {who}: {text}")
    return newest_lines_within(lines, budget)


def newest_lines_within(lines: Sequence[str], budget: int) -> str:
    """The newest `lines` whose estimates (+1 per line break) fit `budget` tokens, in order."""
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        cost = estimate_text_tokens(line) + 1
        if used + cost > budget:
            break
        kept.append(line)
        used += cost
    return "\n".join(reversed(kept))

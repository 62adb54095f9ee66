"""How a quote or a forward is shown, decided at render time against the current window.

- Target inside the window (also our own reply): `reply_to:<alias>` in the header, no text.
  When the member selected part of the target (Telegram's `quote`), the fragment is shown
  as well, on a line that needs only the id: `[quote id:m9;] <fragment>`; a reply to one
  task of a checklist names it the same way, `[quote id:m9;task:2;] <the task's text>`.
- Otherwise a line before the body:
  `[quote id:<alias or platform id>;chat:<name>;user_id:<sender>;date:<YYYY-MM-DD>;`
  `time:<HH:mm>;forwarded_from:<name>;] <summary>` (one line; fields only when they apply).
  The alias is used when the target is on the active path (outside the window), else the
  platform id (`unknown` when the update named none). `chat:` only for a quote from another
  chat (`external_reply`), with its title or `@username`. `user_id` / `time` are left out
  when unknown; `date` only when the quoted message is from another day than the quoting
  one (a bare `HH:mm` would read as today).
  `forwarded_from:` names the original author when the quoted message was a forward (one
  level), so the words are not credited to whoever forwarded them. `task:<id>` the checklist
  task the reply is about (the summary is then that task's text).
- A reply to a story (`reply_to_story`): `[quote story:<id>;chat:<name>;] [story <name>]`,
  never `reply_to` nor a reference (a story is no message of this chat).
  The summary is the stored one-line `Quote.summary`, escaped, with `…` when truncated.
- A truncated summary adds one entry to an `[Untrusted conversation references]` block
  after the body, pointing at the tool that reads it whole:
  `- quote id:m3 is truncated; inspect_conversation_reference(reference="m3") returns it in full`
  A quote that could not be resolved (empty summary) gets `… was not resolved; …` instead.
  A summary that covers the whole quote adds no entry.
- A quote from another chat never becomes `reply_to` and is not offered to the tool (our
  platform ids are per chat); its line shows the platform id.
- A forward is one line before the body, one level only: `[forwarded from <name>]`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, tzinfo

from bot.context.escaping import escape_member_text, header_value, inline_value
from bot.context.headers import local_day, local_hhmm
from bot.context.placeholders import leading_placeholders
from bot.domain.facts import Forward, Quote

REFERENCES_MARKER = "[Untrusted conversation references]"
UNKNOWN_ID = "unknown"  # an external reply that named no message
ELLIPSIS = "…"


@dataclass(frozen=True, slots=True, kw_only=True)
class QuoteView:
    """How one quote renders.

    `reply_to` goes in the header; `line` before the body; `reference` is an entry of the
    `[Untrusted conversation references]` block. `alias` / `platform_id` are what the line
    showed, for the turn's alias table (`None` when it showed neither usable form).
    """

    reply_to: str | None = None
    line: str | None = None
    reference: str | None = None
    alias: str | None = None
    platform_id: int | None = None


def render_quote(
    quote: Quote,
    *,
    in_window: Mapping[int, str],
    on_path: Mapping[int, str],
    zone: tzinfo,
    quoted_at: datetime,
    chat_id: int | None = None,
) -> QuoteView:
    """Render `quote` of a message written at `quoted_at`.

    `in_window` maps platform ids of messages shown before this one in the window to their
    aliases; `on_path` does the same for the rest of the active path.
    """
    if quote.story is not None:
        return _story_view(quote)
    foreign = quote.chat_name is not None or (
        chat_id is not None and quote.chat_id is not None and quote.chat_id != chat_id
    )
    if not foreign and quote.id in in_window:
        return _in_window_view(quote, in_window[quote.id])
    path_alias = None if foreign else on_path.get(quote.id)
    shown = path_alias if path_alias is not None else str(quote.id) if quote.id else UNKNOWN_ID
    fields = [f"id:{header_value(shown)};", *_fields(quote, zone=zone, quoted_at=quoted_at)]
    summary = _tail(quote.summary)
    if quote.truncated and not summary.endswith(ELLIPSIS):
        summary += ELLIPSIS
    line = "[quote " + "".join(fields) + "]" + (" " + summary if summary else "")
    reference = None
    if not foreign and (quote.truncated or not quote.summary):
        state = "is truncated" if quote.truncated else "was not resolved"
        reference = (
            f"- quote id:{shown} {state}; "
            f'inspect_conversation_reference(reference="{shown}") returns it in full'
        )
    return QuoteView(
        line=line,
        reference=reference,
        alias=path_alias,
        platform_id=None if foreign or path_alias is not None or not quote.id else quote.id,
    )


def _in_window_view(quote: Quote, alias: str) -> QuoteView:
    """`reply_to:` in the header; a line only for a selected fragment or a checklist task."""
    task = f"task:{quote.task};" if quote.task is not None else ""
    fragment = _tail(quote.summary) if quote.fragment else ""
    if fragment and quote.truncated and not fragment.endswith(ELLIPSIS):
        fragment += ELLIPSIS
    if not fragment and not task:
        return QuoteView(reply_to=alias)
    line = f"[quote id:{header_value(alias)};{task}]" + (f" {fragment}" if fragment else "")
    return QuoteView(reply_to=alias, line=line)


def _fields(quote: Quote, *, zone: tzinfo, quoted_at: datetime) -> list[str]:
    """The quote line's fields after `id:`, those that apply, in their order."""
    fields = []
    if quote.chat_name:
        fields.append(f"chat:{header_value(quote.chat_name)};")
    if quote.sender_id is not None:
        fields.append(f"user_id:{quote.sender_id};")
    if quote.timestamp is not None:
        if local_day(quote.timestamp, zone) != local_day(quoted_at, zone):
            fields.append(f"date:{local_day(quote.timestamp, zone).isoformat()};")
        fields.append(f"time:{local_hhmm(quote.timestamp, zone)};")
    if quote.forwarded_from:
        fields.append(f"forwarded_from:{header_value(quote.forwarded_from)};")
    if quote.task is not None:
        fields.append(f"task:{quote.task};")
    return fields


def _story_view(quote: Quote) -> QuoteView:
    """A reply to a story: its id and chat, and the story's placeholder."""
    fields = [f"story:{quote.story};"]
    if quote.chat_name:
        fields.append(f"chat:{header_value(quote.chat_name)};")
    summary = _tail(quote.summary)
    return QuoteView(line="[quote " + "".join(fields) + "]" + (" " + summary if summary else ""))


def _tail(summary: str) -> str:
    """The summary on the rest of our quote line: one line; its member text escaped.

    A summary starts with our own placeholders (`[视频 12s] …`) or with member text; the
    member text after the placeholders is escaped like a line of its own, so a typed
    `[quote id:m1;]` or `[Turn context]` cannot pass for ours.
    """
    placeholders, text = leading_placeholders(" ".join(summary.split()))
    return placeholders + escape_member_text(text)


def references_block(entries: list[str]) -> str:
    """The `[Untrusted conversation references]` block, or `""` without entries."""
    return "\n".join([REFERENCES_MARKER, *entries]) if entries else ""


def forward_line(forward: Forward) -> str:
    """`[forwarded from <name>]` (`[forwarded]` when the origin has no name)."""
    name = inline_value(forward.from_name).strip()
    return f"[forwarded from {name}]" if name else "[forwarded]"

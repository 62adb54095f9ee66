"""Projection: the window's records rendered into the messages the model is sent.

One record renders as (docs/architecture.md, Rendering a message):
- user: `<header>\\n[forwarded from …]\\n[quote …] …\\n<escaped body>\\n<media placeholders>`
  then, when a quote is truncated or unresolved, an `[Untrusted conversation references]`
  block; absent parts leave no empty line. A burst message merged into the previous turn
  keeps `continues_turn`. In a legacy row (`UserRecord.legacy`) that is not the current
  message, per-turn blocks and paragraphs are stripped (`legacy.strip_per_turn_blocks` /
  `strip_per_turn_text`); kept legacy blocks are joined with a blank line. A legacy row
  that is a `[Tool results]` carrier renders as the carrier alone (no header, not escaped),
  so it stays in the previous turn and is shrunk with the old tool results. A new row is
  never stripped: its text is the member's, escaped. A deleted message (`UserRecord.deleted`)
  renders `<header>\n[deleted]`: its content left storage with it (`bot.domain.erasure`).
- assistant: `<header>\\n<text>` with its tool calls; a tool-call-only step without platform
  ids gets no header (it was never a chat message) and empty content. The text is the
  model's own (its echoed headers were stripped before sending), so it is not escaped.
- tool results: one `tool` message per result; an error reads `error[<code>]: <content>`
  (`error: <content>` without a code) so the code survives old-result shrinking.
- event: `<header>\\n[event] <escaped text>`, a user message and a turn of its own (like an
  unanswered group message).
- summary: `[Earlier conversation summary]\\n<escaped text>`, no header.

The current message carries `per_turn_blocks` after a blank line, so the stored form
(header + body) stays a byte-exact prefix of what the provider cached. Ended turns' tool
results are shrunk; then every message gets its token estimate cached, once.

Rendering walks the window oldest first and a message reads only what came before it, so
while the window start stays put, every message but the current one renders byte-identical
from call to call. That also lets a call resume where the last one stopped: a projection
keeps what it rendered before its current record (`RenderedPrefix`: those records, the
arguments, the walk's state, their messages), and the next call of the session, given it
as `resume`, renders only the records after it, when its window starts with those same
record objects under the same arguments (else it renders the whole window, as always).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, tzinfo
from typing import assert_never

from bot.context.escaping import escape_member_text
from bot.context.headers import HeaderWalker, WalkState
from bot.context.legacy import strip_per_turn_blocks, strip_per_turn_text
from bot.context.placeholders import media_placeholders
from bot.context.quotes import QuoteView, forward_line, references_block, render_quote
from bot.context.tokens import estimate_text_tokens, with_token_estimate
from bot.context.tool_results import shrink_old_tool_results, tool_result_message
from bot.context.turns import TOOL_RESULTS_PREFIX, turn_starts
from bot.domain.erasure import DELETED_MARKER
from bot.domain.ids import Locale, Scene
from bot.domain.messages import ChatMessage
from bot.domain.records import (
    AssistantRecord,
    ContentBlock,
    RecordBody,
    ServiceMessageRecord,
    StoredRecord,
    SummaryRecord,
    ToolResultsRecord,
    UserRecord,
)

SUMMARY_MARKER = "[Earlier conversation summary]"
EVENT_MARKER = "[event]"
PER_TURN_SEPARATOR = "\n\n"
LEGACY_BLOCK_SEPARATOR = "\n\n"


@dataclass(frozen=True, slots=True)
class RenderedPrefix:
    """The part of a projection before its current record, to resume from (module doc)."""

    records: tuple[StoredRecord, ...]
    arguments: tuple[object, ...]
    state: _RendererState
    messages: tuple[ChatMessage, ...]
    """Their messages with their estimates, before old tool results are shrunk."""
    record_index: tuple[int, ...]

    def resumes(self, records: Sequence[StoredRecord], arguments: tuple[object, ...]) -> bool:
        """Whether `records` start with this prefix's records, rendered under `arguments`."""
        mine = self.records
        return (
            arguments == self.arguments
            and len(records) >= len(mine)
            and all(a is b for a, b in zip(records, mine, strict=False))
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Projection:
    """The history and current message of one model call (no system prompt).

    - `aliases`: every `(alias, platform id)` shown, for the turn's `AliasTable`;
      `references`: quoted platform ids shown without an alias (`register_reference`).
    - `record_index[i]`: the index in the window of the record message i came from.
    - `turn_start_indexes`: message indexes where turns start (`turns.is_turn_start`).
    - `current_message_index`: the message holding the per-turn blocks, if any.
    - `current_tokens`: that message's estimate; `history_tokens`: all the others.
    """

    messages: tuple[ChatMessage, ...]
    aliases: tuple[tuple[str, int], ...]
    references: tuple[int, ...]
    record_index: tuple[int, ...]
    turn_start_indexes: tuple[int, ...]
    current_message_index: int | None
    history_tokens: int
    current_tokens: int
    prefix: RenderedPrefix | None = field(default=None, compare=False, repr=False)
    """What the next call may resume from (`project(resume=...)`)."""


def project(
    records: Sequence[StoredRecord],
    *,
    current_index: int | None,
    scene: Scene,
    zone: tzinfo,
    locale: Locale,
    bot_user_id: int | None,
    per_turn_blocks: str = "",
    quote_targets: Mapping[int, str] | None = None,
    chat_id: int | None = None,
    owner_id: int | None = None,
    resume: RenderedPrefix | None = None,
) -> Projection:
    """Render the window `records` (oldest first, aliases attached) for the model.

    `current_index` is the record that receives `per_turn_blocks` (the newest user message
    of the turn). `quote_targets` maps platform ids on the active path outside the window to
    their aliases. `chat_id`, when given, keeps quotes from other chats out of `reply_to`.
    `owner_id` marks the owner's messages (`owner:true;` in the header). `resume` is the
    `prefix` of the session's last projection (see the module doc): the result is the same
    with it or without it.
    """
    on_path = quote_targets or {}
    arguments = (scene, zone, locale, bot_user_id, tuple(on_path.items()), chat_id, owner_id)
    renderer = _Renderer(
        scene=scene,
        zone=zone,
        locale=locale,
        bot_user_id=bot_user_id,
        on_path=on_path,
        chat_id=chat_id,
        owner_id=owner_id,
    )
    messages: list[ChatMessage] = []
    record_index: list[int] = []
    start = 0
    stop = len(records) if current_index is None else current_index
    if resume is not None and len(resume.records) <= stop and resume.resumes(records, arguments):
        renderer.restore(resume.state)
        messages.extend(resume.messages)
        record_index.extend(resume.record_index)
        start = len(resume.records)
    prefix: RenderedPrefix | None = None
    current_message: int | None = None
    for index in range(start, len(records)):
        if index == stop:
            prefix = _prefix(records, stop, arguments, renderer, messages, record_index)
        rendered = renderer.render(records[index], is_current=index == current_index)
        if index == current_index and rendered and per_turn_blocks:
            last = rendered[-1]
            tail = PER_TURN_SEPARATOR + per_turn_blocks if last.content else per_turn_blocks
            rendered[-1] = replace(last, content=last.content + tail)
        if index == current_index and rendered:
            current_message = len(messages) + len(rendered) - 1
        messages.extend(with_token_estimate(message) for message in rendered)
        record_index.extend([index] * len(rendered))
    if prefix is None:
        prefix = _prefix(records, stop, arguments, renderer, messages, record_index)

    starts = turn_starts(messages)
    anchor = len(messages) if current_message is None else current_message + 1
    current_turn_start = max((s for s in starts if s < anchor), default=0)
    shrunk: Sequence[ChatMessage] = messages
    if renderer.tool_steps:  # only tool steps shrink (calls, results, legacy carriers)
        shrunk = shrink_old_tool_results(
            messages, current_turn_start=current_turn_start, locale=locale
        )
    final = tuple(shrunk)  # each with its estimate (a shrunk one's recomputed)
    current_tokens = 0 if current_message is None else final[current_message].tokens or 0
    by_tools, referenced_by_tools = _shown_by_tools(records, record_index, final)
    return Projection(
        messages=final,
        aliases=(*renderer.aliases, *by_tools),
        references=(*renderer.references, *referenced_by_tools),
        record_index=tuple(record_index),
        turn_start_indexes=tuple(starts),
        current_message_index=current_message,
        history_tokens=sum(m.tokens or 0 for m in final) - current_tokens,
        current_tokens=current_tokens,
        prefix=prefix,
    )


def _prefix(
    records: Sequence[StoredRecord],
    stop: int,
    arguments: tuple[object, ...],
    renderer: _Renderer,
    messages: Sequence[ChatMessage],
    record_index: Sequence[int],
) -> RenderedPrefix:
    """What was rendered of `records[:stop]` so far: the walk's state is copied, since
    rendering goes on from it."""
    return RenderedPrefix(
        records=tuple(records[:stop]),
        arguments=arguments,
        state=renderer.snapshot(),
        messages=tuple(messages),
        record_index=tuple(record_index),
    )


def current_record_index(records: Sequence[StoredRecord]) -> int | None:
    """The record a turn answers: the newest user message (the per-turn blocks ride on
    it), or the newest record when there is none; None for an empty window."""
    for index in range(len(records) - 1, -1, -1):
        if isinstance(records[index].body, UserRecord):
            return index
    return len(records) - 1 if records else None


def without_per_turn_cost(projection: Projection, per_turn_blocks: str) -> list[ChatMessage]:
    """The projected messages with the current message costed without `per_turn_blocks`:
    the window budget counts history, not this turn's context."""
    messages = list(projection.messages)
    index = projection.current_message_index
    if index is not None and per_turn_blocks:
        current = messages[index]
        extra = estimate_text_tokens(PER_TURN_SEPARATOR + per_turn_blocks)
        messages[index] = replace(current, tokens=max(0, (current.tokens or 0) - extra))
    return messages


_ESTIMATE_TIME = datetime(2000, 1, 1, tzinfo=UTC)


def record_tokens(body: RecordBody, *, locale: Locale = "zh") -> int:
    """The stored cost of a record body, estimated once at record time.

    Rendered as the first message of a group window (full sender form, date and time) with
    an inline quote line, so it errs high: the projected form is never longer, bar aliases.
    """
    record = StoredRecord(id=0, session_id=0, parent_id=None, created_at=_ESTIMATE_TIME, body=body)
    renderer = _Renderer(
        scene="group", zone=UTC, locale=locale, bot_user_id=None, on_path={}, chat_id=None
    )
    return sum((with_token_estimate(m).tokens or 0) for m in renderer.render(record))


@dataclass(frozen=True, slots=True)
class _RendererState:
    """A `_Renderer`'s state between two records (its containers copied)."""

    walk: WalkState
    in_window: Mapping[int, str]
    aliases: tuple[tuple[str, int], ...]
    references: tuple[int, ...]
    albums: Mapping[str, str]
    tool_steps: bool


class _Renderer:
    """Renders records in window order, keeping the header walk and the aliases shown."""

    __slots__ = (
        "_albums",
        "_chat_id",
        "_in_window",
        "_locale",
        "_on_path",
        "_walker",
        "_zone",
        "aliases",
        "references",
        "tool_steps",
    )

    def __init__(
        self,
        *,
        scene: Scene,
        zone: tzinfo,
        locale: Locale,
        bot_user_id: int | None,
        on_path: Mapping[int, str],
        chat_id: int | None,
        owner_id: int | None = None,
    ) -> None:
        self._walker = HeaderWalker(
            zone=zone, scene=scene, bot_user_id=bot_user_id, owner_id=owner_id
        )
        self._zone = zone
        self._locale = locale
        self._on_path = on_path
        self._chat_id = chat_id
        self._in_window: dict[int, str] = {}
        self.aliases: list[tuple[str, int]] = []
        self.references: list[int] = []
        self._albums: dict[str, str] = {}
        """media_group_id → alias of its first part rendered in this window."""
        self.tool_steps = False
        """Whether a tool call, a tool result or a legacy `[Tool results]` carrier was
        rendered: nothing else is shrunk once its turn has ended."""

    def snapshot(self) -> _RendererState:
        return _RendererState(
            walk=self._walker.snapshot(),
            in_window=dict(self._in_window),
            aliases=tuple(self.aliases),
            references=tuple(self.references),
            albums=dict(self._albums),
            tool_steps=self.tool_steps,
        )

    def restore(self, state: _RendererState) -> None:
        """Go on from `state` (taken from a renderer with the same arguments)."""
        self._walker.restore(state.walk)
        self._in_window = dict(state.in_window)
        self.aliases = list(state.aliases)
        self.references = list(state.references)
        self._albums = dict(state.albums)
        self.tool_steps = state.tool_steps

    def render(self, record: StoredRecord, *, is_current: bool = False) -> list[ChatMessage]:
        body = record.body
        match body:
            case UserRecord():
                carrier = legacy_carrier(body)
                if carrier is not None:  # written by the old system, not by a member
                    rendered = [ChatMessage(role="user", content=carrier)]
                    self.tool_steps = True
                else:
                    rendered = [self._user(record, body, is_current=is_current)]
            case AssistantRecord():
                rendered = [self._assistant(record, body)]
                self.tool_steps = self.tool_steps or bool(body.tool_calls)
            case ToolResultsRecord():
                rendered = [tool_result_message(result) for result in body.results]
                self.tool_steps = True
            case ServiceMessageRecord():
                header = self._walker.header(
                    ids=record.alias_parts, at=record.created_at, sender=body.actor
                )
                text = f"{EVENT_MARKER} {escape_member_text(body.text)}"
                rendered = [ChatMessage(role="user", content=_join([header, text]))]
            case SummaryRecord():
                text = _join([SUMMARY_MARKER, escape_member_text(body.text)])
                rendered = [ChatMessage(role="user", content=text)]
            case _:
                assert_never(body)
        self._note_shown(record)
        return rendered

    def _album_alias(self, record: StoredRecord, body: UserRecord) -> str | None:
        """The alias of the album's first part shown in this window (this one's, first)."""
        if body.album is None:
            return None
        first = self._albums.get(body.album)
        if first is None:
            first = next((alias for alias in record.alias_parts if alias is not None), None)
            if first is not None:
                self._albums[body.album] = first
        return first

    def _user(self, record: StoredRecord, body: UserRecord, *, is_current: bool) -> ChatMessage:
        view = QuoteView()
        if body.quote is not None:
            view = render_quote(
                body.quote,
                in_window=self._in_window,
                on_path=self._on_path,
                zone=self._zone,
                quoted_at=record.created_at,
                chat_id=self._chat_id,
            )
            if view.alias is not None:
                self.aliases.append((view.alias, body.quote.id))
            elif view.platform_id is not None:
                self.references.append(view.platform_id)
        header = self._walker.header(
            ids=record.alias_parts,
            at=record.created_at,
            sender=body.sender,
            reply_to=view.reply_to,
            album=self._album_alias(record, body),
            linked_channel=body.linked_channel,
            paid_stars=body.paid_stars,
        )
        content = _join(
            [
                header,
                forward_line(body.forward) if body.forward is not None else "",
                view.line or "",
                DELETED_MARKER
                if body.deleted
                else escape_member_text(_user_text(body, is_current=is_current)),
                media_placeholders(body.media, self._locale) if body.media else "",
                references_block([view.reference]) if view.reference else "",
            ]
        )
        return ChatMessage(role="user", content=content, continues_turn=body.merged)

    def _assistant(self, record: StoredRecord, body: AssistantRecord) -> ChatMessage:
        header = ""
        if body.text or record.message_id is not None:
            header = self._walker.header(ids=record.alias_parts, at=record.created_at)
        return ChatMessage(
            role="assistant",
            content=_join([header, body.text]),
            tool_calls=body.tool_calls,
            reasoning=body.reasoning,  # for the wire only: never part of any text
        )

    def _note_shown(self, record: StoredRecord) -> None:
        # Only after rendering: a message may reply only to what came before it, which keeps
        # each message's form independent of anything later in the window.
        for alias, message_id in zip(record.alias_parts, record.message_ids, strict=False):
            if alias is not None and message_id is not None and message_id not in self._in_window:
                self._in_window[message_id] = alias
                self.aliases.append((alias, message_id))


def _user_text(body: UserRecord, *, is_current: bool) -> str:
    """The member's words. Per-turn context is stripped from legacy rows only (and not
    while current): a member who types `[Turn context]` keeps every word, escaped."""
    if not body.blocks:
        if not body.legacy or is_current:
            return body.text
        return strip_per_turn_text(body.text)
    blocks: Sequence[ContentBlock] = (
        body.blocks if is_current or not body.legacy else strip_per_turn_blocks(body.blocks)
    )
    return LEGACY_BLOCK_SEPARATOR.join(block.text for block in blocks if block.text)


def legacy_carrier(body: UserRecord) -> str | None:
    """The text of a legacy `[Tool results]` carrier (prompt-mode tool results stored as a
    user row), or None. It belongs to the previous turn and is shrunk like a tool result
    once that turn has ended; a member's text that starts so is escaped, never a carrier."""
    if not body.legacy:
        return None
    text = _user_text(body, is_current=True)
    return text if text.startswith(TOOL_RESULTS_PREFIX) else None


def _shown_by_tools(
    records: Sequence[StoredRecord], record_index: Sequence[int], messages: Sequence[ChatMessage]
) -> tuple[list[tuple[str, int]], list[int]]:
    """The aliases and platform ids that kept tool results (search_history's hits) still
    show after old results are shrunk: each is stored with its result (`ToolResult.shown`)
    and counts only while its `id:` field is still in the text the model reads."""
    aliases: list[tuple[str, int]] = []
    references: list[int] = []
    for message, index in zip(messages, record_index, strict=True):
        body = records[index].body
        if message.role != "tool" or not isinstance(body, ToolResultsRecord):
            continue
        for result in body.results:
            if result.call_id != message.tool_call_id:
                continue
            aliases.extend(
                (alias, mid) for alias, mid in result.shown if f"id:{alias};" in message.content
            )
            references.extend(
                mid for mid in result.shown_references if f"id:{mid};" in message.content
            )
    return aliases, references


def _join(parts: Sequence[str]) -> str:
    return "\n".join(part for part in parts if part)

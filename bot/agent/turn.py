"""A turn: its policy and its state.

The policy is what the turn's parts take from the settings, one small frozen policy per
part, kept beside the part that reads it (`WindowPolicy` in `bot.agent.window`,
`PromptPolicy` in `bot.agent.request`, `CompactionPolicy` in `bot.agent.compactor`; a
model call's `CallPolicy` and the tools' `ToolPolicy` here). `bot/app/wiring.py` builds them
once; `TurnPolicy` holds them all, with the tool loop's own limits, for `TurnRunner`, which
wires the parts. The state is what one turn is made of as it runs: its growing request
(`TurnState`), its window, and how it ends (`TurnFailed`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from bot.context.history_trim import IndexedHistory
from bot.context.projection import current_record_index
from bot.context.task_block import TaskInstruction
from bot.context.tokens import estimate_message_tokens, with_token_estimate
from bot.context.tool_results import DEFAULT_MAX_TOOL_RESULT_CHARS
from bot.context.turns import count_turns, remove_orphaned_tool_messages
from bot.context.window import RuntimeLimits
from bot.domain.messages import ChatMessage
from bot.domain.records import StoredRecord, UserRecord

if TYPE_CHECKING:
    from bot.agent.compactor import CompactionPolicy
    from bot.agent.request import PromptPolicy, RequestBuilder
    from bot.agent.window_state import ConversationWindow, WindowPolicy


@dataclass(frozen=True, slots=True, kw_only=True)
class CallPolicy:
    """One model call: the runtime limits (the budget, and an honoured
    `max_context_tokens` as the window), the output cap and the call's deadline (None:
    unbounded)."""

    limits: RuntimeLimits = field(default_factory=RuntimeLimits)
    max_output_tokens: int | None = None
    deadline_seconds: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolPolicy:
    """What the tools of one turn may do: the stored result's length, the calls of one
    model response that run, the messages tools may post besides the reply (0: no cap)."""

    max_result_chars: int = DEFAULT_MAX_TOOL_RESULT_CHARS
    max_calls_per_step: int = 8
    max_messages_per_turn: int = 5


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnPolicy:
    """The policies of a turn's parts, and the tool loop's own limits: tool iterations
    before the final call without tools, and the whole turn's deadline (None: unbounded).
    `compaction` None: compaction is off."""

    window: WindowPolicy
    prompt: PromptPolicy
    calls: CallPolicy = field(default_factory=CallPolicy)
    tools: ToolPolicy = field(default_factory=ToolPolicy)
    compaction: CompactionPolicy | None = None
    max_tool_iterations: int = 10
    turn_deadline_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class Layout:
    """Where the parts of a laid-out request sit: the rendered window is
    `messages[history_start:history_end]`, the current message at `current_index`;
    `kept_turns` the window's turns; `fixed_tokens` our estimate of the system prompt and
    the tool schemas."""

    history_start: int = 0
    history_end: int = 0
    current_index: int = 0
    kept_turns: int = 0
    fixed_tokens: int = 0


@dataclass(slots=True)
class TurnState:
    """The request of one turn as it grows call by call (never shared between turns).

    `messages` is what the next provider call sends, laid out by `lay_out` (where its parts
    sit: `layout`): the head, the window (`window`, which owns what the
    model sees of the history and is the only thing that shrinks it), then this turn's tool
    steps. `published` counts the window's trims already published on the bus (all of them
    are reported with the next call). `refused`: after a context overflow, what the refused
    request needed (real tokens, or the limit the provider reported when lower); no later
    request of the turn may reach it. `requester`: the member whose message the turn
    answers (their spend limit applies); in a scheduled task's turn (`task`) its creator.
    """

    turn_id: str
    window: ConversationWindow
    messages: IndexedHistory = field(default_factory=IndexedHistory)
    layout: Layout = field(default_factory=Layout)
    published: int = 0
    iteration: int = 0
    requester: int | None = None
    refused: int | None = None
    task: TaskInstruction | None = None

    def lay_out(self, prompt: RequestBuilder) -> None:
        """Put the head (`prompt`'s system prompt, and the breadcrumb and summary when
        earlier history is out), the window's messages without orphaned tool steps, and this
        turn's tool steps so far in `messages` (to start, and after the window changed)."""
        window = self.window
        head = prompt.head(window.session, has_earlier=window.crumb, summary=window.summary)
        projection = window.projection
        history = list(remove_orphaned_tool_messages(projection.messages))
        index = projection.current_message_index
        current = (
            len(history)
            if index is None
            else next(i for i, m in enumerate(history) if m is projection.messages[index])
        )
        if window.images and index is not None and current < len(history):
            # the turn's images ride on the current message, for this turn's calls only
            carrier = history[current]
            history[current] = with_token_estimate(replace(carrier, images=window.images))
        if window.detached and window.blocks:
            # no member's message is current (a scheduled task): the per-turn blocks are a
            # message of their own after the history, which renders as every turn's does
            current = len(history)
            history.append(with_token_estimate(ChatMessage(role="user", content=window.blocks)))
        tail = self.messages[self.layout.history_end :]
        self.messages = IndexedHistory([*head, *history, *tail])
        end = len(head) + len(history)
        key = window.session.key
        schemas = prompt.schema_tokens(window.session.scene, key.chat_id, key.thread_id)
        self.layout = Layout(
            history_start=len(head),
            history_end=end,
            current_index=len(head) + current,
            # the history's turns: the breadcrumb and the summary block before it are not
            kept_turns=count_turns(self.messages[:end], len(head)),
            fixed_tokens=estimate_message_tokens(head[0]) + schemas,
        )


def requester_of(records: Sequence[StoredRecord]) -> int | None:
    """The member whose message the turn answers (the current record's sender); None when
    no member's message is current."""
    current = current_record_index(records)
    body = records[current].body if current is not None else None
    return body.sender.id if isinstance(body, UserRecord) else None


class TurnFailed(Exception):
    """Ends a turn with one clear message for the user: the text `key` names, or `notice`
    when given; `silent` ends it with none (a spent budget the chat was already told of)."""

    def __init__(
        self,
        user_message_key: str,
        detail: str,
        *,
        notice: str | None = None,
        silent: bool = False,
    ) -> None:
        super().__init__(detail)
        self.key = user_message_key
        self.detail = detail
        self.notice = notice
        self.silent = silent

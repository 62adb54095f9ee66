"""What a turn's parts take from the settings: one small frozen policy per part.

`bot/app/wiring.py` builds them once from the settings; each part receives only the one it
reads: the window (`RequestBuilder`, the dashboard), the prompt and projection
(`RequestBuilder`), a model call (`ProviderCaller`), the tools (`ToolRunner`), compaction
(`Compactor`). `TurnPolicy` holds them all, with the tool loop's own limits, for
`TurnRunner`, which wires the parts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import tzinfo

from bot.context.tool_results import DEFAULT_MAX_TOOL_RESULT_CHARS
from bot.context.window import PerScene, RuntimeLimits
from bot.domain.ids import Locale


@dataclass(frozen=True, slots=True, kw_only=True)
class SceneCaps:
    """The turn and message caps of one scene's window."""

    max_turns: int
    max_messages: int


@dataclass(frozen=True, slots=True, kw_only=True)
class WindowPolicy:
    """What each scene's window is held to (`history.*`).

    `history_budgets` are real tokens (the window converts them into our estimate through
    the route's token correction); `caps` the turn and message caps per scene, overrides
    applied; `count_unanswered_turns`: every turn counts against the turn cap, answered or
    not (`history.turn_cap_counts = "all"`)."""

    history_budgets: PerScene[int]
    caps: PerScene[SceneCaps]
    headroom: float = 0.25
    count_unanswered_turns: bool = False

    @property
    def max_records(self) -> int:
        """How many records to load: the largest message cap plus room for tool rows."""
        caps = (self.caps.group, self.caps.private, self.caps.owner)
        return max(c.max_messages for c in caps) * 2 + 20


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptPolicy:
    """How the system prompt, the per-turn blocks and the projection are written."""

    zone: tzinfo
    zone_name: str = "UTC"
    locale: Locale = "zh"
    command_prefix: str = "/"
    workspace_rules: str = ""
    owner_id: int | None = None
    chat_locale: Callable[[int], Locale] | None = None
    """The locale of a chat (`BOT_LOCALE=auto`: its recent members'); None: `locale`."""

    def locale_of(self, chat_id: int | None) -> Locale:
        if chat_id is None or self.chat_locale is None:
            return self.locale
        return self.chat_locale(chat_id)


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
class CompactionPolicy:
    """`summary_budgets`: the summary's bound per scene (already held to a quarter of the
    scene's history budget, `bound_summaries`), reserved inside the window's budget;
    `route`: where summary calls go (None: the chat's own route); `prepare_margin`: how
    near a move must be to prepare its summary after a reply."""

    summary_budgets: PerScene[int]
    route: str | None = None
    prepare_margin: float = 0.1


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

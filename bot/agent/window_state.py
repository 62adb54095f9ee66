"""A turn's window as plain state (`ConversationWindow`), the policy windows are held to
(`WindowPolicy`, `SceneCaps`) and a window as loaded before its plan (`LoadedWindow`).

`bot.agent.window.Windows` makes and changes them; nothing here does I/O or holds a
reference back to its maker.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.agent.routes import ModelRoute
from bot.context.alias_table import AliasTable
from bot.context.history_trimmed import HistoryTrimmed
from bot.context.projection import Projection
from bot.context.tokens import TokenCorrection
from bot.context.window import PerScene, TurnCosts, WindowLimits
from bot.domain.messages import ImagePart
from bot.domain.records import StoredRecord, SummaryRecord
from bot.ports import SessionInfo


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
    max_records: int = field(init=False, repr=False, compare=False)
    """How many records to load: the largest message cap plus room for tool rows (worked
    out once, when the policy is made: every turn reads it)."""

    def __post_init__(self) -> None:
        caps = (self.caps.group, self.caps.private, self.caps.owner)
        object.__setattr__(self, "max_records", max(c.max_messages for c in caps) * 2 + 20)


@dataclass(slots=True, kw_only=True)
class ConversationWindow:
    """One turn's window over a session's history, as the turn's requests show it.

    `records` are the kept records, oldest first; `projection` their rendering (before the
    orphan repair); `blocks` the per-turn blocks the current message carries, rendered once
    per turn so a re-render keeps them byte for byte; `aliases` the turn's alias table,
    which a re-render adds to (an alias shown once stays valid for the turn); `summary` the
    compaction summary shown after the breadcrumb; `images` the turn's images, on the
    current message for this turn's calls only (never stored). `detached`: no member's
    message is current (a scheduled task's turn): every record renders as history and the
    blocks ride on a message of their own after it (`TurnState.lay_out`). `crumb`: earlier
    history is left out (the breadcrumb is shown). `budget` is the route's runtime budget and
    `history_budget` the scene's, in real tokens; `correction` converts them into our
    estimate. `trims` are the window's moves and cuts not yet reported with a model call.
    """

    session: SessionInfo
    route: ModelRoute
    turn_id: str
    correction: TokenCorrection
    limits: WindowLimits
    records: tuple[StoredRecord, ...]
    projection: Projection
    blocks: str
    aliases: AliasTable
    summary: SummaryRecord | None
    images: tuple[ImagePart, ...]
    crumb: bool
    budget: int
    history_budget: int
    dropped_turns: int = 0
    fold_soon: bool = False
    """The next window move is near: prepare the summary after the reply."""
    trims: list[HistoryTrimmed] = field(default_factory=list)
    detached: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadedWindow:
    """A session's window as loaded for a turn, before its plan: the records from the stored
    start (`earlier`: records precede them; `previous`: the summary of those), their
    projection with this turn's per-turn blocks, each turn's cost and first record
    (`starts[i]`), and the limits the window is held to."""

    session: SessionInfo
    route: ModelRoute
    correction: TokenCorrection
    limits: WindowLimits
    records: tuple[StoredRecord, ...]
    earlier: bool
    previous: SummaryRecord | None
    blocks: str
    projection: Projection
    costs: TurnCosts
    starts: tuple[int, ...]

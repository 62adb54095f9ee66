"""What a turn is made of: its growing request, its window, and how it ends."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from bot.agent.routes import ModelRoute
from bot.context.alias_table import AliasTable
from bot.context.history_trim import HistoryTrimmed, IndexedHistory
from bot.context.projection import Projection
from bot.context.tokens import NO_CORRECTION, TokenCorrection
from bot.domain.messages import ImagePart
from bot.domain.records import StoredRecord, SummaryRecord
from bot.ports import Delivery, SessionInfo


@dataclass(slots=True)
class TurnState:
    """The request of one turn as it grows call by call (never shared between turns).

    `messages` is what the next provider call sends: the head (system prompt, breadcrumb
    when earlier history is left out), the window rendered from `window.records`, then this
    turn's tool steps; `messages[history_start:history_end]` is the rendered window and
    `current_index` where the current message sits. A runtime trim drops whole turns from
    `window` and renders it again (`RequestBuilder.drop_turns`). `crumb` says whether the
    breadcrumb is in. `pending_trims` are the trims since the last model call: published
    on the bus as they are flushed, and all of them reported with the next call.
    `messages` keeps running totals (`IndexedHistory`), so a trim reads its event's figures
    without scanning what it drops. `correction` is the route's learned ratio of reported
    to estimated tokens: `budget`, `history_budget` and the capacity check are in real
    tokens and are converted into estimate units through it.
    """

    session: SessionInfo
    route: ModelRoute
    turn_id: str
    messages: IndexedHistory
    crumb: bool
    current_index: int
    fixed_tokens: int
    budget: int
    history_budget: int
    kept_turns: int
    window: TurnWindow
    history_start: int
    history_end: int
    dropped_turns: int = 0
    pending_trims: list[HistoryTrimmed] = field(default_factory=list)
    fold_soon: bool = False
    """The next window move is near: prepare the summary after the reply."""
    published_trims: int = 0
    iteration: int = 0
    correction: TokenCorrection = NO_CORRECTION
    requester: int | None = None
    """The member whose message the turn answers (their spend limit applies)."""
    refused: int | None = None
    """After a context overflow: what the refused request needed (real tokens, or the limit
    the provider reported when lower); no later request of the turn may reach it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnWindow:
    """The window's records as this turn shows them, and what rendering them needs again.

    `records` are the kept records, oldest first; `projection` their rendering (before the
    orphan repair); `blocks` the per-turn blocks the current message carries, rendered once
    per turn so a re-render keeps them byte for byte; `aliases` the turn's alias table,
    which a re-render adds to (an alias shown once stays valid for the turn).
    """

    records: tuple[StoredRecord, ...]
    projection: Projection
    blocks: str
    aliases: AliasTable
    summary: SummaryRecord | None = None
    """The compaction summary shown after the breadcrumb, if any."""
    images: tuple[ImagePart, ...] = ()
    """The turn's images, on the current message for this turn's calls only (never stored;
    `bot.agent.turn_images`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnOutcome:
    """How a turn ended: answered (the reply was delivered) or failed (with `error`)."""

    status: Literal["answered", "failed"]
    text: str = ""
    delivery: Delivery | None = None
    iterations: int = 0
    hit_iteration_cap: bool = False
    error: str | None = None
    failure: str | None = None
    """What kind of failure (the `TurnFailed` key, or `not_delivered`); None when answered."""


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

"""`[Reactions since your last reply]`: the reactions on the bot's messages a turn shows.

Old messages never re-render when someone reacts (that would break the cached prefix): the
reactions since the bot's last turn ride on the current message instead, one line each
(`Alice 👍 on m12`), and every alias a line names joins the turn's alias table.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Protocol

from bot.context.escaping import inline_value
from bot.domain.records import StoredRecord
from bot.ports import Clock, SessionInfo, StoredReaction
from bot.store_ports import RecentReactions

MAX_REACTION_LINES = 10
"""At most this many reactions (the newest) in `[Reactions since your last reply]`."""

MAX_REACTION_CURSORS = 4_096
"""Sessions whose reaction read times are kept (the oldest are forgotten first)."""


class AliasLookup(Protocol):
    """The aliases of reacted messages outside the loaded window (the history store)."""

    async def find_aliases(
        self, session_id: int, message_ids: Collection[int]
    ) -> dict[int, str]: ...


class ReactionsBlock:
    """Reads the reactions a turn shows, and remembers per session when the last answered
    turn read them (a later turn shows only newer ones)."""

    def __init__(
        self, reactions: RecentReactions | None, *, aliases: AliasLookup, clock: Clock
    ) -> None:
        self.reactions = reactions
        """Where reactions on the bot's messages are read (none shown when unset)."""
        self.aliases = aliases
        self.clock = clock
        self._read: OrderedDict[int, datetime] = OrderedDict()
        """Per session: when the newest request read reactions (bot clock), not yet answered."""
        self._answered: OrderedDict[int, datetime] = OrderedDict()
        """Per session: when the last answered turn read reactions; later ones are new."""

    def answered(self, session_id: int) -> None:
        """The turn whose request read reactions last for `session_id` was answered: the
        reactions it showed are not shown again (one that arrived while it ran is)."""
        read = self._read.pop(session_id, None)
        if read is not None:
            _remember(self._answered, session_id, read)

    async def read(
        self,
        session: SessionInfo,
        records: Sequence[StoredRecord],
        *,
        loaded: Sequence[StoredReaction] | None = None,
        read_at: datetime | None = None,
    ) -> tuple[tuple[str, ...], tuple[tuple[str, int], ...]]:
        """`Alice 👍 on m12` for each reaction on the bot's messages since its last turn on
        the loaded path (or since the oldest loaded record when no reply is loaded), newest
        `MAX_REACTION_LINES`, and the (alias, platform id) of every alias a line names: they
        join the turn's alias table.

        "Since its last turn" is read as since the newest member message before the last
        reply (the one that turn answered): a reaction handled while that turn ran, after
        its request was built, is shown now instead of never.

        `loaded`: the reactions read with the window (`load_turn`: the newest
        `MAX_REACTION_LINES` or more after its oldest record, oldest first), filtered here
        instead of a second read; `read_at` is when that read began (bot clock), the time
        the next turn shows reactions after (now, without it)."""
        if self.reactions is None or not records:
            return (), ()
        last_reply = max((i for i, r in enumerate(records) if r.kind == "assistant"), default=None)
        since = records[0].created_at
        if last_reply is not None:
            asked = [r.created_at for r in records[:last_reply] if r.kind == "user"]
            since = max(asked) if asked else records[last_reply].created_at
        # On the bot's own clock, when this process answered a turn here: exact (a message's
        # date is Telegram's, to the second). After a restart the rule above stands alone.
        answered = self._answered.get(session.id)
        if answered is not None:
            since = max(since, answered)
        _remember(self._read, session.id, self.clock.now() if read_at is None else read_at)
        if loaded is None:
            found = await self.reactions.reactions_since(
                session.key.chat_id, session.key.thread_id, since, limit=MAX_REACTION_LINES
            )
        else:  # a filter of the newest after the window's start, itself no later than since
            later = [r for r in loaded if r.created_at > since]
            found = tuple(later[-MAX_REACTION_LINES:])
        if not found:
            return (), ()
        aliases = _loaded_aliases(records)
        missing = {r.message_id for r in found} - set(aliases)
        if missing:
            aliases.update(await self.aliases.find_aliases(session.id, missing))
        lines = tuple(
            f"{inline_value(r.user_name) or r.user_id} {inline_value(r.emoji)} on "
            f"{aliases.get(r.message_id, f'message {r.message_id}')}"
            for r in found
        )
        shown = tuple(
            (aliases[r.message_id], r.message_id) for r in found if r.message_id in aliases
        )
        return lines, shown


def _loaded_aliases(records: Sequence[StoredRecord]) -> dict[int, str]:
    return {
        mid: alias
        for record in records
        for mid, alias in zip(record.message_ids, record.alias_parts, strict=False)
        if mid is not None and alias is not None
    }


def _remember(cursors: OrderedDict[int, datetime], session_id: int, at: datetime) -> None:
    cursors[session_id] = at
    cursors.move_to_end(session_id)
    while len(cursors) > MAX_REACTION_CURSORS:
        cursors.popitem(last=False)

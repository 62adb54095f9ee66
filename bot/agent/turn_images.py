"""The current turn's images: found in the turn's messages (and the message they quote),
fetched, and put on the current message for this call only (docs/architecture.md, Images,
documents and voice).

Images are per-turn material like `[Turn context]`: they ride on the current message and
are never stored; the next turn shows the same messages with their placeholders only, so
the history prefix the provider cached never changes. At most `max_images_per_turn`, the
newest first; the rest, and any file that was refused, are named in the `[Images]` block
with the reason. A route without vision gets no image bytes, only that block saying it
cannot see them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from bot.context.images import (
    ImageSlot,
    ImageWire,
    bounds_for,
    data_url,
    image_tokens_for,
    images_block,
)
from bot.context.images import is_image as is_image_media
from bot.context.projection import current_record_index
from bot.domain.facts import InboundMessage, Media
from bot.domain.ids import Scene
from bot.domain.messages import ImagePart
from bot.domain.records import StoredRecord, UserRecord
from bot.errors import MediaRefused
from bot.ports import MediaFiles, SessionInfo
from bot.store_ports import HistoryStore, PlatformMessages

DEFAULT_MAX_IMAGES_PER_TURN = 4


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnImagesFound:
    """What the turn shows: the image parts for the current message and the block naming
    every image of the turn (empty when it has none)."""

    images: tuple[ImagePart, ...] = ()
    block: str = ""


NO_IMAGES = TurnImagesFound()


@dataclass(frozen=True, slots=True, kw_only=True)
class _Candidate:
    label: str
    media: Media
    quoted: bool = False


SpentFor = Callable[[int, Scene, int | None], Awaitable[bool]]
"""Whether a turn asked by a member in a chat would be refused by a spent budget
(`bot.agent.spend.SpendGuard.spent_for`)."""


class TurnImages:
    """Finds and fetches a turn's images. `files` is None when the bot cannot fetch files
    (no token): the block then says the images could not be fetched."""

    def __init__(
        self,
        *,
        files: MediaFiles | None,
        messages: PlatformMessages,
        aliases: HistoryStore,
        max_per_turn: int = DEFAULT_MAX_IMAGES_PER_TURN,
        prefetch: bool = False,
        spent_for: SpentFor | None = None,
    ) -> None:
        self.spent_for = spent_for
        """Spend limits: a member whose budget is spent has no image downloaded."""
        self._prefetches: set[asyncio.Task[None]] = set()
        self.prefetching = prefetch and files is not None
        """Some route sees images: a trigger's images are fetched while its turn waits for
        the merge window and the chat's lock, so the turn itself reads the cache."""
        self.files = files
        self.messages = messages
        self.aliases = aliases
        self.max_per_turn = max_per_turn

    async def aclose(self) -> None:
        """Close the file source's HTTP client."""
        close = getattr(self.files, "aclose", None)
        if close is not None:
            await close()

    def prefetch(self, message: InboundMessage) -> None:
        """Start fetching the images of a message a turn will answer (`TurnScheduler`)."""
        if not self.prefetching or self.files is None:
            return
        images = [media for media in message.media if is_image_media(media)]
        if not images:
            return
        if self.spent_for is None:
            for media in images:
                self.files.prefetch(media)
            return
        task = asyncio.create_task(self._prefetch_within_budget(message, images))
        self._prefetches.add(task)
        task.add_done_callback(self._prefetches.discard)

    async def _prefetch_within_budget(self, message: InboundMessage, images: list[Media]) -> None:
        files, spent_for = self.files, self.spent_for
        if files is None or spent_for is None:
            return
        group = message.chat_type in ("group", "supergroup")
        scene: Scene = "group" if group else "private"
        if await spent_for(message.chat_id, scene, message.sender.id):
            return  # over budget: nothing is downloaded
        for media in images:
            files.prefetch(media)

    async def collect(
        self,
        session: SessionInfo,
        records: Sequence[StoredRecord],
        *,
        wire: ImageWire,
        vision: bool,
    ) -> TurnImagesFound:
        """The images of the turn `records` ends with (none fetched for a member whose
        budget is spent: the turn's call is refused anyway)."""
        candidates = await self._candidates(session, records)
        if not candidates:
            return NO_IMAGES
        if self.spent_for is not None:
            current = current_record_index(records)
            body = records[current].body if current is not None else None
            asker = body.sender.id if isinstance(body, UserRecord) else None
            if await self.spent_for(session.key.chat_id, session.scene, asker):
                return NO_IMAGES
        if not vision:
            unseen = tuple(ImageSlot(label=c.label, quoted=c.quoted) for c in candidates)
            return TurnImagesFound(block=images_block(unseen, vision=False))
        chosen = candidates[: self.max_per_turn]
        fetched = await asyncio.gather(*(self._fetch(c, wire) for c in chosen))
        slots: list[ImageSlot] = []
        images: list[ImagePart] = []
        for candidate, result in zip(chosen, fetched, strict=True):
            if isinstance(result, ImagePart):
                images.append(result)
                slots.append(
                    ImageSlot(
                        label=candidate.label,
                        quoted=candidate.quoted,
                        sent=True,
                        width=result.width,
                        height=result.height,
                    )
                )
            else:
                slots.append(
                    ImageSlot(label=candidate.label, quoted=candidate.quoted, reason=result)
                )
        over = f"over the {self.max_per_turn} images a turn shows; view_image shows it"
        slots.extend(
            ImageSlot(label=c.label, quoted=c.quoted, reason=over)
            for c in candidates[self.max_per_turn :]
        )
        return TurnImagesFound(images=tuple(images), block=images_block(tuple(slots), vision=True))

    async def _fetch(self, candidate: _Candidate, wire: ImageWire) -> ImagePart | str:
        if self.files is None:
            return "files cannot be fetched in this mode"
        try:
            image = await self.files.image(candidate.media, bounds_for(wire))
        except MediaRefused as refused:
            return refused.reason
        return ImagePart(
            url=data_url(image.media_type, image.data),
            width=image.width,
            height=image.height,
            tokens=image_tokens_for(wire, image.width, image.height),
            label=candidate.label,
        )

    async def _candidates(
        self, session: SessionInfo, records: Sequence[StoredRecord]
    ) -> list[_Candidate]:
        """The turn's images, newest first: the current message's, the earlier messages of
        the same burst or album, then those of the messages they quote."""
        current = current_record_index(records)
        if current is None or not isinstance(records[current].body, UserRecord):
            return []
        turn = _turn_records(records, current)
        found: list[_Candidate] = []
        own_ids: set[int] = set()
        for record in reversed(turn):
            body = record.body
            assert isinstance(body, UserRecord)
            own_ids.update(mid for mid in record.message_ids if mid is not None)
            images = [m for m in body.media if is_image_media(m)]
            if images:
                label = _label(record)
                found.extend(_Candidate(label=label, media=m) for m in images)
        chat_id = session.key.chat_id
        quoted: list[int] = []
        for record in reversed(turn):
            body = record.body
            assert isinstance(body, UserRecord)
            quote = body.quote
            if quote is None or quote.chat_id not in (None, chat_id) or quote.id in own_ids:
                continue
            if quote.id not in quoted:
                quoted.append(quote.id)
        if not quoted:
            return found
        names = {mid: _label(r) for r in records for mid in r.message_ids if mid is not None}
        missing = [mid for mid in quoted if mid not in names]
        if missing:
            names.update(await self.aliases.find_aliases(session.id, missing))
        for message_id in quoted:
            target = await self.messages.find_platform_message(chat_id, message_id)
            if target is None:
                continue
            label = names.get(message_id) or str(message_id)
            found.extend(
                _Candidate(label=label, media=m, quoted=True)
                for m in target.media
                if is_image_media(m)
            )
        return found


def _turn_records(records: Sequence[StoredRecord], current: int) -> list[StoredRecord]:
    """The current record, the burst messages merged into its turn before it, and the other
    parts of their albums in the window; oldest first."""
    chosen = [current]
    index = current
    while index > 0:
        body = records[index].body
        if not (isinstance(body, UserRecord) and body.merged):
            break
        index -= 1
        if isinstance(records[index].body, UserRecord):
            chosen.append(index)
    albums = {
        body.album
        for i in chosen
        if isinstance(body := records[i].body, UserRecord) and body.album is not None
    }
    if albums:
        chosen.extend(
            i
            for i, record in enumerate(records)
            if isinstance(record.body, UserRecord) and record.body.album in albums
        )
    return [records[i] for i in sorted(set(chosen))]


def _label(record: StoredRecord) -> str:
    """The alias the model reads for a record (`m12`), or its platform id."""
    if record.alias_parts and record.alias_parts[0]:
        return record.alias_parts[0]
    if record.alias_seq is not None:
        return f"m{record.alias_seq}"
    return str(record.message_id or "")

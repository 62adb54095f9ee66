"""A turn's request: the system prompt, the per-turn blocks, and the layout around the window.

The window (`bot.agent.window_state.ConversationWindow`) decides which records the model sees and
renders them; this module says what surrounds them: the system prompt first, then the
breadcrumb and the summary when earlier history is left out, the window's messages without
tool steps left without their partner (an imported or edited history never reaches the
provider with them, `remove_orphaned_tool_messages`), the turn's images on the current
message, then this turn's tool steps. The per-turn blocks (time, scene, reactions, images
named) ride on the current message only and are never stored.

The system prompt (`bot.agent.system_prompt.build_system_prompt`, written once per set of
facts) is stable per scene and tool set, so the provider's prefix cache keeps hitting. Old
messages never re-render when someone reacts (that would break the cached prefix): the
reactions since the bot's last turn ride on the current message instead (`ReactionsBlock`,
`[Reactions since your last reply]`), one line each (`Alice 👍 on m12`), and every alias a
line names joins the turn's alias table.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo

from bot.agent.chat_scope import NO_SCOPES, ChatScopes, offered_in
from bot.agent.routes import ModelRoute
from bot.agent.system_prompt import PromptFacts, build_system_prompt
from bot.agent.turn_images import NO_IMAGES, TurnImages
from bot.context.compaction import summary_message
from bot.context.escaping import escape_member_text, inline_value
from bot.context.history_trim import breadcrumb_message
from bot.context.memory_block import MemoryLimits, render_memory_block
from bot.context.projection import PER_TURN_SEPARATOR, current_record_index
from bot.context.task_block import TaskInstruction, render_task_block
from bot.context.tokens import ensure_token_estimate, estimate_message_tokens
from bot.context.tool_schema_cost import estimate_tool_schema_tokens
from bot.domain.ids import Locale, Scene
from bot.domain.messages import ChatMessage, ImagePart
from bot.domain.records import StoredRecord, SummaryRecord, UserRecord
from bot.ports import Clock, SessionInfo, StoredReaction
from bot.store_ports import ChatEventStore, HistoryStore, MemoryFacts
from bot.tools.base import Tool

_REMEMBERED = 64
"""System prompts and schema estimates kept (scenes × locales × tool sets in use)."""


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
    """The locale of a chat (`BOT_LOCALE=auto`: its sticky language); None: `locale`."""
    member_locale: Callable[[int], Locale | None] | None = None
    """The language a member writes in (`BOT_LOCALE=auto`), for the per-turn block: the
    prompt and the history stay in the chat's, so their cached prefix holds."""

    def locale_of(self, chat_id: int | None) -> Locale:
        if chat_id is None or self.chat_locale is None:
            return self.locale
        return self.chat_locale(chat_id)


@dataclass(frozen=True, slots=True)
class TurnBlocks:
    """The per-turn blocks of a turn's current message, the reactions they name (alias,
    message id) and the images that ride on it."""

    text: str
    reacted: tuple[tuple[str, int], ...] = ()
    images: tuple[ImagePart, ...] = ()


class RequestBuilder:
    """Writes what surrounds a turn's window. `tools` is the runner's live tool table
    (name → tool): the prompt and the schema cost follow it when tools are added."""

    def __init__(
        self,
        *,
        tools: Mapping[str, Tool],
        clock: Clock,
        policy: PromptPolicy,
        bot_id: int | None,
        bot_name: str,
        aliases: HistoryStore,
        reactions: ChatEventStore | None = None,
        images: TurnImages | None = None,
        scopes: ChatScopes = NO_SCOPES,
        memory: MemoryFacts | None = None,
        memory_limits: MemoryLimits | None = None,
    ) -> None:
        self.scopes = scopes
        """Each chat's persona, tools, time zone and locale (`[chats."<id>"]`)."""
        self.memory = memory
        """The kept facts the `[Memory]` block shows; None: no block."""
        self.memory_limits = memory_limits or MemoryLimits()
        self.images = images
        """Finds and fetches the turn's images; None: images are never looked at."""
        self.tools = tools
        self.clock = clock
        self.policy = policy
        self.bot_id = bot_id
        self.bot_name = bot_name
        self.reactions_block = ReactionsBlock(reactions, aliases=aliases, clock=clock)
        self._systems: dict[PromptFacts, ChatMessage] = {}
        """Each system prompt written, with its estimate: one per scene, locale and tool set."""
        self._schemas: dict[tuple[Scene, tuple[int, ...]], tuple[int, tuple[Tool, ...]]] = {}
        """Each tool set's schema estimate, by the tools' identities (kept alive beside it)."""

    def reactions_answered(self, session_id: int) -> None:
        """The turn whose request was built last for `session_id` was answered: the reactions
        it showed are not shown again (one that arrived while it ran is)."""
        self.reactions_block.answered(session_id)

    def system_prompt(self, scene: Scene, chat_id: int | None = None, thread_id: int = 0) -> str:
        return self._system_message(scene, chat_id, thread_id).content

    def offered(self, scene: Scene, chat_id: int | None, thread_id: int = 0) -> dict[str, Tool]:
        """The tools a request in this chat offers: its scene's, less what the chat denies."""
        tools = offered_in(self.tools, scene)
        if chat_id is None:
            return tools
        scope = self.scopes.of(chat_id, thread_id)
        return {name: tool for name, tool in tools.items() if scope.offers(name)}

    def _system_message(self, scene: Scene, chat_id: int | None, thread_id: int = 0) -> ChatMessage:
        """The system message with its estimate, written once per set of facts (it is the
        same text for every chat of a scene, locale, tool set and persona)."""
        tools = self.offered(scene, chat_id, thread_id)
        scope = self.scopes.of(chat_id, thread_id) if chat_id is not None else None
        facts = PromptFacts(
            bot_name=self.bot_name,
            scene=scene,
            locale=(scope.locale if scope else None) or self.policy.locale_of(chat_id),
            tool_names=tuple(tools),
            workspace_rules=self.policy.workspace_rules,
            tool_index=tuple(t.summary for t in tools.values() if t.summary),
            owner_id=self.policy.owner_id,
            persona=scope.persona if scope else "",
        )
        system = self._systems.get(facts)
        if system is None:
            if len(self._systems) >= _REMEMBERED:  # tool sets came and went: start over
                self._systems.clear()
            system = ensure_token_estimate(
                ChatMessage(role="system", content=build_system_prompt(facts))
            )
            self._systems[facts] = system
        return system

    def schema_tokens(self, scene: Scene, chat_id: int | None = None, thread_id: int = 0) -> int:
        """Our estimate of the tool schemas a request in `scene` sends (estimated once per
        tool set: a tool's schema is fixed when it is made)."""
        offered = tuple(self.offered(scene, chat_id, thread_id).values())
        key = (scene, tuple(id(tool) for tool in offered))
        known = self._schemas.get(key)
        if known is None:
            if len(self._schemas) >= _REMEMBERED:
                self._schemas.clear()
            known = (estimate_tool_schema_tokens([t.spec.schema() for t in offered]), offered)
            self._schemas[key] = known
        return known[0]

    def fixed_tokens(self, session: SessionInfo, *, crumb: bool) -> int:
        """Our estimate of what every request of the session sends besides its history: the
        system prompt, the tool schemas, and with `crumb` the breadcrumb."""
        system = self.head(session, has_earlier=False, summary=None)[0]
        crumb_tokens = estimate_message_tokens(breadcrumb_message()) if crumb else 0
        key = session.key
        schemas = self.schema_tokens(session.scene, key.chat_id, key.thread_id)
        return estimate_message_tokens(system) + crumb_tokens + schemas

    def head(
        self, session: SessionInfo, *, has_earlier: bool, summary: SummaryRecord | None
    ) -> list[ChatMessage]:
        """System prompt, then the breadcrumb and the summary when earlier history is out."""
        head = [self._system_message(session.scene, session.key.chat_id, session.key.thread_id)]
        if has_earlier:
            head.append(breadcrumb_message())
            if summary is not None:
                head.append(summary_message(summary))
        return head

    def turn_locale(
        self,
        session: SessionInfo,
        records: Sequence[StoredRecord],
        task: TaskInstruction | None = None,
    ) -> Locale:
        """The per-turn `language:` line: the language of the member the turn answers (with
        `BOT_LOCALE=auto`; a task's creator), else the chat's; the chat's own language stays
        in the prompt."""
        policy = self.policy
        locale = policy.locale_of(session.key.chat_id)
        if policy.member_locale is not None and task is not None:
            return policy.member_locale(task.creator_id) or locale
        current = current_record_index(records)
        body = records[current].body if current is not None else None
        if policy.member_locale is not None and isinstance(body, UserRecord):
            return policy.member_locale(body.sender.id) or locale
        return locale

    async def blocks(
        self,
        session: SessionInfo,
        route: ModelRoute,
        records: Sequence[StoredRecord],
        told_user: Sequence[str],
        *,
        fetch: bool = True,
        reactions: Sequence[StoredReaction] | None = None,
        read_at: datetime | None = None,
        task: TaskInstruction | None = None,
    ) -> TurnBlocks:
        """The per-turn blocks of the turn answering `records`' newest message (the
        `[Images]` block last, and with `fetch`, the images it names fetched). With `task`
        (a scheduled task's turn, `bot.context.task_block`) the `[Scheduled task]` block
        comes first, `[Memory]` is its creator's, and no image is looked at: no member's
        message is current."""
        shown, reacted = await self.reactions_block.read(
            session, records, loaded=reactions, read_at=read_at
        )
        policy = self.policy
        scope = self.scopes.of(session.key.chat_id, session.key.thread_id)
        locale = scope.locale or self.turn_locale(session, records, task)
        block_text = build_per_turn_blocks(
            TurnContext(
                now=self.clock.now(),
                zone=scope.zone or policy.zone,
                zone_name=scope.timezone or policy.zone_name,
                model=route.model,
                scene=session.scene,
                locale=locale,
                command_prefix=policy.command_prefix,
                told_user=told_user,
                topic=session.title if session.key.thread_id else None,
                reactions=shown,
            )
        )
        if task is not None:
            block_text = f"{render_task_block(task)}{PER_TURN_SEPARATOR}{block_text}"
        memory = await self.memory_block(session, records, task)
        if memory:
            block_text = f"{block_text}{PER_TURN_SEPARATOR}{memory}" if block_text else memory
        found = NO_IMAGES
        if fetch and task is None and self.images is not None:
            found = await self.images.collect(
                session, records, wire=route.wire, vision=route.vision
            )
            if found.block:
                block_text = (
                    f"{block_text}{PER_TURN_SEPARATOR}{found.block}" if block_text else found.block
                )
        return TurnBlocks(block_text, reacted, found.images)

    async def memory_block(
        self,
        session: SessionInfo,
        records: Sequence[StoredRecord],
        task: TaskInstruction | None = None,
    ) -> str:
        """`[Memory]`: the facts of this chat about the member whose message the turn answers
        (a task's creator), then the chat's (`bot.context.memory_block`); read for every
        request, never stored."""
        if self.memory is None:
            return ""
        member: int | None
        if task is not None:
            member = task.creator_id
        else:
            current = current_record_index(records)
            body = records[current].body if current is not None else None
            member = body.sender.id if isinstance(body, UserRecord) else None
        limits = self.memory_limits
        facts = await self.memory.facts_of(
            session.key.chat_id, member, limit=max(limits.per_member, limits.per_chat)
        )
        if not facts:  # the common case: the renderer is not even entered
            return ""
        return render_memory_block(facts, member_id=member, max_tokens=limits.max_tokens)


# The per-turn blocks


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnContext:
    now: datetime
    zone: tzinfo
    zone_name: str
    model: str
    scene: Scene
    locale: Locale
    command_prefix: str
    told_user: Sequence[str] = ()
    topic: str | None = None
    """The forum topic's name, in a topic's session."""
    reactions: Sequence[str] = ()
    """`Alice 👍 on m12`: reactions on the bot's messages since its last reply here."""
    workspace_rules: str = ""
    tool_index: Sequence[str] = ()


def build_per_turn_blocks(ctx: TurnContext) -> str:
    """The per-turn context: appended after the current message's header and body, never
    stored, never replayed."""
    local = ctx.now.astimezone(ctx.zone)
    blocks = [
        "\n".join(
            [
                "[Turn context]",
                f"time: {local:%Y-%m-%d %H:%M} {ctx.zone_name}",
                f"model: {ctx.model}",
                f"scene: {ctx.scene}",
                *(
                    [f"topic: {escape_member_text(' '.join(ctx.topic.split()))}"]
                    if ctx.topic
                    else []
                ),
                f"language: {ctx.locale}",
                f"command prefix: {ctx.command_prefix}",
            ]
        )
    ]
    if ctx.told_user:
        blocks.append("\n".join(["[Already told the user]", *(f"- {t}" for t in ctx.told_user)]))
    if ctx.reactions:
        blocks.append(
            "\n".join(["[Reactions since your last reply]", *(f"- {r}" for r in ctx.reactions)])
        )
    if ctx.workspace_rules.strip():
        blocks.append("[Workspace rules]\n" + ctx.workspace_rules.strip())
    if ctx.tool_index:
        blocks.append("\n".join(["[Tool index]", *(f"- {t}" for t in ctx.tool_index)]))
    return "\n\n".join(blocks)


# `[Reactions since your last reply]`

MAX_REACTION_LINES = 10
"""At most this many reactions (the newest) in `[Reactions since your last reply]`."""

MAX_REACTION_CURSORS = 4_096
"""Sessions whose reaction read times are kept (the oldest are forgotten first)."""


class ReactionsBlock:
    """Reads the reactions a turn shows, and remembers per session when the last answered
    turn read them (a later turn shows only newer ones)."""

    def __init__(
        self, reactions: ChatEventStore | None, *, aliases: HistoryStore, clock: Clock
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
        last_reply = max(
            (i for i, r in enumerate(records) if r.body.kind == "assistant"), default=None
        )
        since = records[0].created_at
        if last_reply is not None:
            asked = [r.created_at for r in records[:last_reply] if r.body.kind == "user"]
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

"""A turn's request: the system prompt, the per-turn blocks, and the layout around the window.

The window (`bot.agent.window.ConversationWindow`) decides which records the model sees and
renders them; this module says what surrounds them: the system prompt first, then the
breadcrumb and the summary when earlier history is left out, the window's messages without
tool steps left without their partner (an imported or edited history never reaches the
provider with them, `remove_orphaned_tool_messages`), the turn's images on the current
message, then this turn's tool steps. The per-turn blocks (time, scene, reactions, images
named) ride on the current message only and are never stored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bot.agent.policy import PromptPolicy
from bot.agent.prompt import PromptFacts, TurnContext, build_per_turn_blocks, build_system_prompt
from bot.agent.reactions_block import ReactionsBlock
from bot.agent.routes import ModelRoute
from bot.agent.turn_images import NO_IMAGES, TurnImages
from bot.context.compaction import summary_message
from bot.context.history_trim import breadcrumb_message
from bot.context.projection import PER_TURN_SEPARATOR
from bot.context.tokens import ensure_token_estimate, estimate_message_tokens
from bot.context.window import estimate_tool_schema_tokens
from bot.domain.ids import Scene
from bot.domain.messages import ChatMessage, ImagePart
from bot.domain.records import StoredRecord, SummaryRecord
from bot.ports import Clock, SessionInfo
from bot.store_ports import ChatEventStore, HistoryStore
from bot.tools.base import Tool, offered_in


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
    ) -> None:
        self.images = images
        """Finds and fetches the turn's images; None: images are never looked at."""
        self.tools = tools
        self.clock = clock
        self.policy = policy
        self.bot_id = bot_id
        self.bot_name = bot_name
        self.reactions_block = ReactionsBlock(reactions, aliases=aliases, clock=clock)

    def reactions_answered(self, session_id: int) -> None:
        """The turn whose request was built last for `session_id` was answered: the reactions
        it showed are not shown again (one that arrived while it ran is)."""
        self.reactions_block.answered(session_id)

    def system_prompt(self, scene: Scene, chat_id: int | None = None) -> str:
        tools = offered_in(self.tools, scene)
        return build_system_prompt(
            PromptFacts(
                bot_name=self.bot_name,
                scene=scene,
                locale=self.policy.locale_of(chat_id),
                tool_names=tuple(tools),
                workspace_rules=self.policy.workspace_rules,
                tool_index=tuple(t.summary for t in tools.values() if t.summary),
                owner_id=self.policy.owner_id,
            )
        )

    def schema_tokens(self, scene: Scene) -> int:
        """Our estimate of the tool schemas a request in `scene` sends."""
        offered = offered_in(self.tools, scene).values()
        return estimate_tool_schema_tokens([t.spec.schema() for t in offered])

    def fixed_tokens(self, session: SessionInfo, *, crumb: bool) -> int:
        """Our estimate of what every request of the session sends besides its history: the
        system prompt, the tool schemas, and with `crumb` the breadcrumb."""
        system = self.head(session, has_earlier=False, summary=None)[0]
        crumb_tokens = estimate_message_tokens(breadcrumb_message()) if crumb else 0
        return estimate_message_tokens(system) + crumb_tokens + self.schema_tokens(session.scene)

    def head(
        self, session: SessionInfo, *, has_earlier: bool, summary: SummaryRecord | None
    ) -> list[ChatMessage]:
        """System prompt, then the breadcrumb and the summary when earlier history is out."""
        system = ChatMessage(
            role="system", content=self.system_prompt(session.scene, session.key.chat_id)
        )
        head = [ensure_token_estimate(system)]
        if has_earlier:
            head.append(breadcrumb_message())
            if summary is not None:
                head.append(summary_message(summary))
        return head

    async def blocks(
        self,
        session: SessionInfo,
        route: ModelRoute,
        records: Sequence[StoredRecord],
        told_user: Sequence[str],
        *,
        fetch: bool = True,
    ) -> TurnBlocks:
        """The per-turn blocks of the turn answering `records`' newest message (the
        `[Images]` block last, and with `fetch`, the images it names fetched)."""
        reactions, reacted = await self.reactions_block.read(session, records)
        policy = self.policy
        text = build_per_turn_blocks(
            TurnContext(
                now=self.clock.now(),
                zone=policy.zone,
                zone_name=policy.zone_name,
                model=route.model,
                scene=session.scene,
                locale=policy.locale_of(session.key.chat_id),
                command_prefix=policy.command_prefix,
                told_user=told_user,
                topic=session.title if session.key.thread_id else None,
                reactions=reactions,
            )
        )
        found = NO_IMAGES
        if fetch and self.images is not None:
            found = await self.images.collect(
                session, records, wire=route.wire, vision=route.vision
            )
            if found.block:
                text = f"{text}{PER_TURN_SEPARATOR}{found.block}" if text else found.block
        return TurnBlocks(text, reacted, found.images)

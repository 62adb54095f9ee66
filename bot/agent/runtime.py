"""The turn runtime: one `run_turn` answers the newest message of a session.

The tool loop, from parts each doing one job:
- `request.RequestBuilder`: window, projection with per-turn blocks, system prompt;
- `provider_call.ProviderCaller`: proactive trim, capacity check, the provider call with
  one overflow recovery, `ModelCalled` / `HistoryTrimmed` on the bus;
- `tool_runner.ToolRunner`: aliases rewritten, tools run, call and results stored;
- `bubbles.ReplyBubbles`: the final answer stored bubble by bubble as it is delivered;
- `metering.CallMetering`: subscribed to the bus, the ledger line and `/context` meter.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol

from bot.agent.bubbles import ReplyBubbles
from bot.agent.compactor import Compactor
from bot.agent.events import EventBus
from bot.agent.ledger import LedgerWriter
from bot.agent.metering import MAX_METERS, CallMeter, CallMetering
from bot.agent.observer import NO_OBSERVER, TurnObserver
from bot.agent.policy import TurnPolicy
from bot.agent.presence import ChatActions, Presence, Typing
from bot.agent.provider_call import ProviderCaller, SpendCheck
from bot.agent.request import RequestBuilder
from bot.agent.routes import RouteTable
from bot.agent.token_truth import TokenTruth
from bot.agent.tool_runner import TOOL_TIMEOUT_SECONDS, ToolRunner
from bot.agent.turn import TurnFailed, TurnOutcome, TurnState
from bot.agent.turn_images import TurnImages
from bot.context.alias_table import AliasTable
from bot.context.cache_plan import ReadPoints
from bot.context.escaping import strip_echoed_header
from bot.domain.ids import Scene
from bot.domain.records import StoredRecord
from bot.ports import Clock, LLMResponse, Messenger, SessionInfo
from bot.store_ports import (
    HistorySearch,
    HistoryStore,
    MessageEraser,
    PlatformMessageStore,
    RecentReactions,
)
from bot.texts import text as user_text
from bot.tools.base import Tool, ToolContext

__all__ = [
    "MAX_METERS",
    "TOOL_TIMEOUT_SECONDS",
    "CallMeter",
    "TurnFailed",
    "TurnOutcome",
    "TurnPolicy",
    "TurnRunner",
    "TurnState",
]

log = logging.getLogger("tgbot.runtime")


class ToldUserNotes(Protocol):
    """What the bot sent in a chat outside model turns (`bot.services.told_user.ToldUser`:
    in this process, or shared by the workers of one PostgreSQL database)."""

    async def peek(self, chat_id: int, thread_id: int = 0) -> tuple[str, ...]: ...

    async def shown(self, chat_id: int, thread_id: int, lines: Sequence[str]) -> None: ...

    async def note(self, chat_id: int, thread_id: int, text: str) -> None: ...


class TurnRunner:
    """Answers the newest message of a session. Turns of one session must not overlap:
    the caller serialises them (one lock per session)."""

    def __init__(
        self,
        *,
        store: HistoryStore,
        platform_messages: PlatformMessageStore,
        messenger: Messenger,
        routes: RouteTable,
        tools: Sequence[Tool],
        ledger: LedgerWriter,
        clock: Clock,
        policy: TurnPolicy,
        bus: EventBus | None = None,
        bot_id: int | None = None,
        bot_name: str = "tgbot",
        told: ToldUserNotes | None = None,
        truth: TokenTruth | None = None,
        reactions: RecentReactions | None = None,
        search: HistorySearch | None = None,
        chat_actions: ChatActions | None = None,
        stream_drafts: bool = True,
        observer: TurnObserver = NO_OBSERVER,
        spend: SpendCheck | None = None,
        images: TurnImages | None = None,
        eraser: MessageEraser | None = None,
    ) -> None:
        self.observer = observer
        """Watches each turn and tool call (tracing, `bot.agent.observer`)."""
        self.presence = Presence(chat_actions, drafts=stream_drafts)
        """"typing…" while a turn runs, stopped before its reply."""
        self.told = told
        """`[Already told the user]` notes, kept until a turn that carried them succeeds."""
        self.messenger = messenger
        self.truth = truth if truth is not None else TokenTruth()
        """Per-route token corrections: learned by metering, used by budgets and checks."""
        self.clock = clock
        self.policy = policy
        self.bus = bus or EventBus()
        self.tools = {tool.spec.name: tool for tool in tools}
        """The live tool table (name → tool), shared by every part."""
        # compaction: on when the policy has one
        self.compactor: Compactor | None = None
        read_points = ReadPoints()  # where the cache was written, shared by every call
        if policy.compaction is not None:
            self.compactor = Compactor(
                store=store,
                routes=routes,
                tools=self.tools,
                bus=self.bus,
                clock=clock,
                policy=policy.compaction,
                read_points=read_points,
                correction=self.truth.correction,
            )
        self.request = RequestBuilder(
            compactor=self.compactor,
            store=store,
            routes=routes,
            tools=self.tools,
            clock=clock,
            window_policy=policy.window,
            prompt=policy.prompt,
            runtime=policy.calls.limits,
            bot_id=bot_id,
            bot_name=bot_name,
            correction=self.truth.correction,
            reactions=reactions,
            images=images,
        )
        self.provider = ProviderCaller(
            tools=self.tools,
            bus=self.bus,
            clock=clock,
            policy=policy.calls,
            window=self.request,
            read_points=read_points,
            spend=spend,
        )
        self.tool_runner = ToolRunner(
            tools=self.tools,
            store=store,
            platform_messages=platform_messages,
            messenger=messenger,
            clock=clock,
            bot_id=bot_id,
            bot_name=bot_name,
            max_result_chars=policy.tools.max_result_chars,
            owner_id=policy.prompt.owner_id,
            max_calls_per_step=policy.tools.max_calls_per_step,
            max_messages_per_turn=policy.tools.max_messages_per_turn,
            search=search,
            zone=policy.prompt.zone,
            observer=observer,
            media_files=images.files if images is not None else None,
            eraser=eraser,
        )
        self.bubbles = ReplyBubbles(
            store=store,
            platform_messages=platform_messages,
            clock=clock,
            bot_id=bot_id,
            bot_name=bot_name,
        )
        self.metering = CallMetering(ledger, truth=self.truth).attach(self.bus)

    @property
    def meters(self) -> OrderedDict[int, CallMeter]:
        """The last call of the most recently active sessions (for `/context`)."""
        return self.metering.meters

    def system_prompt(self, scene: Scene) -> str:
        return self.request.system_prompt(scene)

    async def aclose(self) -> None:
        """Stop background work (summaries in preparation) and save the token corrections
        learned since their last save."""
        if self.compactor is not None:
            await self.compactor.aclose()
        if self.request.images is not None:
            await self.request.images.aclose()
        self.truth.flush()
        await self.truth.flush_shared()

    async def prepare(
        self,
        session: SessionInfo,
        *,
        turn_id: str,
        told_user: Sequence[str] = (),
        persist_window: bool = True,
    ) -> tuple[TurnState, AliasTable, list[StoredRecord]]:
        """Everything up to the first provider call (see `RequestBuilder.prepare`)."""
        return await self.request.prepare(
            session, turn_id=turn_id, told_user=told_user, persist_window=persist_window
        )

    async def run_turn(
        self, session: SessionInfo, *, reply_to: int | None, told_user: Sequence[str] = ()
    ) -> TurnOutcome:
        turn_id = uuid.uuid4().hex[:12]
        with self.observer.turn(session, turn_id) as watch:
            key = session.key
            async with self.presence.typing(key.chat_id, key.thread_id) as typing:
                outcome = await self._run_turn(session, turn_id, reply_to, told_user, typing)
            watch.ended(outcome)
            return outcome

    async def _run_turn(
        self,
        session: SessionInfo,
        turn_id: str,
        reply_to: int | None,
        told_user: Sequence[str],
        typing: Typing | None,
    ) -> TurnOutcome:
        key = session.key
        if not told_user and self.told is not None:
            told_user = await self.told.peek(key.chat_id, key.thread_id)
        state, aliases, records = await self.prepare(session, turn_id=turn_id, told_user=told_user)
        session = state.session
        tool_ctx = self.tool_runner.context(session, records, route=state.route)
        state.requester = tool_ctx.rights.requester_id if tool_ctx.rights is not None else None
        try:
            async with asyncio.timeout(self.policy.turn_deadline_seconds):
                return await self._steps(
                    state, aliases, tool_ctx, reply_to, turn_id, told_user, typing
                )
        except TimeoutError:
            failure = TurnFailed(
                "provider", f"the turn took longer than {self.policy.turn_deadline_seconds:g} s"
            )
            log.warning("turn %s failed: %s", turn_id, failure.detail)
            return await self._failed(state, failure, reply_to, typing, hit_cap=False)
        except TurnFailed as failure:
            log.warning("turn %s failed: %s", turn_id, failure.detail)
            capped = state.iteration > self.policy.max_tool_iterations
            return await self._failed(state, failure, reply_to, typing, hit_cap=capped)

    async def _steps(
        self,
        state: TurnState,
        aliases: AliasTable,
        tool_ctx: ToolContext,
        reply_to: int | None,
        turn_id: str,
        told_user: Sequence[str],
        typing: Typing | None,
    ) -> TurnOutcome:
        session = state.session
        key = session.key
        private = session.scene != "group"
        while True:
            state.iteration += 1
            hit_cap = state.iteration > self.policy.max_tool_iterations
            # one draft id per reply: each model call may be the one that answers
            draft = self.presence.draft(key.chat_id, key.thread_id, private=private)
            response = await self.provider.call(state, final=hit_cap, on_text=draft)
            if response.stop == "refusal":
                # not asked again (it would refuse again, and bill again); any text it wrote
                # before refusing is not an answer and is not delivered
                why = response.refusal or "no reason given"
                raise TurnFailed("refusal", f"the model refused: {why}")
            if response.tool_calls and not hit_cap:
                await self.tool_runner.run_calls(state, response, aliases, tool_ctx)
                if tool_ctx.erased:  # deleted now: not in this turn's next calls either
                    await self.request.forget(state, frozenset(tool_ctx.erased))
                    tool_ctx.erased.clear()
                continue
            if response.tool_calls and not response.text.strip():
                # a provider that ignores tool_choice "none": its calls are not run
                raise TurnFailed("bad_response", "the model called tools at the iteration cap")
            outcome = await self._deliver(state, response, reply_to, hit_cap, typing)
            if outcome.status == "answered":
                self.request.reactions_answered(session.id)
                if self.told is not None:
                    await self.told.shown(key.chat_id, key.thread_id, told_user)
            if state.fold_soon:  # the next window move is near: prepare its summary
                self.request.after_reply(session, turn_id=turn_id)
            return outcome

    async def _failed(
        self,
        state: TurnState,
        failure: TurnFailed,
        reply_to: int | None,
        typing: Typing | None,
        *,
        hit_cap: bool,
    ) -> TurnOutcome:
        """Tell the chat the turn failed (a short notice in its language)."""
        session = state.session
        key = session.key
        if typing is not None:
            await typing.stop()
        if failure.silent:  # e.g. a spent budget the chat was already told of
            return TurnOutcome(
                status="failed",
                iterations=state.iteration,
                hit_iteration_cap=hit_cap,
                error=failure.detail,
                failure=failure.key,
            )
        text = failure.notice or user_text(self.policy.prompt.locale_of(key.chat_id), failure.key)
        delivery = await self.messenger.send_text(
            key.chat_id, text, thread_id=key.thread_id, reply_to=reply_to
        )
        if self.told is not None and delivery.delivered:  # the model never wrote it
            await self.told.note(key.chat_id, key.thread_id, text)
        return TurnOutcome(
            status="failed",
            text=text,
            delivery=delivery,
            iterations=state.iteration,
            hit_iteration_cap=hit_cap,
            error=failure.detail,
            failure=failure.key,
        )

    async def _deliver(
        self,
        state: TurnState,
        response: LLMResponse,
        reply_to: int | None,
        hit_cap: bool,
        typing: Typing | None = None,
    ) -> TurnOutcome:
        """Send the final answer, stored bubble by bubble as Telegram confirms each."""
        text = strip_echoed_header(response.text).strip()
        if not text:
            raise TurnFailed("bad_response", "the model's reply was empty after cleaning")
        key = state.session.key
        if response.stop == "length":  # cut at the output limit: say so, stored as shown
            marker = user_text(self.policy.prompt.locale_of(key.chat_id), "cut_marker")
            text = f"{text}\n\n{marker}"
        recorder = self.bubbles.recorder(state.session, reply_to, text, response.reasoning)
        if typing is not None:  # no "typing…" after the reply
            await typing.stop()
        delivery = await self.messenger.send_text(
            key.chat_id, text, thread_id=key.thread_id, reply_to=reply_to, on_bubble=recorder
        )
        await recorder.settle(delivery)
        if not delivery.delivered:
            log.warning("reply not delivered in chat %s: %s", key.chat_id, delivery.error)
        return TurnOutcome(
            status="answered" if delivery.delivered else "failed",
            text=text,
            delivery=delivery,
            iterations=state.iteration,
            hit_iteration_cap=hit_cap,
            error=None if delivery.delivered else str(delivery.error),
            failure=None if delivery.delivered else "not_delivered",
        )

"""The turn runtime: one `run_turn` answers the newest message of a session.

The tool loop, from parts each doing one job:
- `window.Windows`: opens the turn's `ConversationWindow` (load, plan, fold, keep,
  persist; the only thing that shrinks it during the turn);
- `request.RequestBuilder`: the system prompt, the per-turn blocks, the layout;
- `provider_call.ProviderCaller`: the turn's calls (proactive trim, one overflow recovery)
  through the one `ModelCaller` (capacity check, cache plan, deadline, `ModelCalled`);
- `tool_runner.ToolRunner`: aliases rewritten, tools run, call and results stored;
- `bubbles.ReplyBubbles`: the final answer stored bubble by bubble as it is delivered;
- `metering.CallMetering`: subscribed to the bus, the ledger line and `/context` meter.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import replace

from bot.agent.compactor import Compactor
from bot.agent.events import TurnOutcome
from bot.agent.metering import MAX_METERS, CallMeter, CallMetering
from bot.agent.provider_call import ProviderCaller
from bot.agent.reply import Presence, ReplyBubbles, Typing
from bot.agent.tool_runner import TOOL_TIMEOUT_SECONDS, ToolRunner
from bot.agent.turn import TurnFailed, TurnPolicy, TurnState, requester_of
from bot.agent.turn_failure import failed_turn
from bot.agent.window import Windows
from bot.context.alias_table import AliasTable
from bot.context.escaping import strip_echoed_header
from bot.context.task_block import TaskInstruction
from bot.domain.ids import Scene
from bot.domain.records import StoredRecord
from bot.ports import LLMResponse, SessionInfo, ToldUserNotes
from bot.texts import text as user_text
from bot.tools.base import ToolContext

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


def new_turn_id() -> str:
    """A fresh turn id: 12 hex digits. It names a turn in logs, traces and the ledger and
    guards nothing, so it comes from the process's seeded generator (`random`: seeded from
    the system at start-up, and again in a forked child) rather than a system call per id
    (`uuid4`, `secrets`), which showed in the CPU of every message."""
    return f"{random.getrandbits(48):012x}"


class TurnRunner:
    """Answers the newest message of a session. Turns of one session must not overlap:
    the caller serialises them (one lock per session)."""

    def __init__(
        self,
        *,
        windows: Windows,
        calls: ProviderCaller,
        tool_runner: ToolRunner,
        bubbles: ReplyBubbles,
        presence: Presence,
        metering: CallMetering,
        policy: TurnPolicy,
        told: ToldUserNotes | None = None,
    ) -> None:
        """Built in `bot/app/wiring.py` (`build_turn_runner`)."""
        self.windows = windows
        """Opens each turn's window (`bot.agent.window`)."""
        self.request = windows.prompt
        """The system prompt, the per-turn blocks and the request's layout."""
        self.calls = calls
        self.tool_runner = tool_runner
        self.bubbles = bubbles
        self.presence = presence
        """"typing…" while a turn runs, stopped before its reply."""
        self.metering = metering
        self.policy = policy
        self.told = told
        """`[Already told the user]` notes, kept until a turn that carried them succeeds."""
        self.observer = tool_runner.observer
        """Watches each turn and tool call (tracing, `bot.agent.events`)."""
        self.messenger = bubbles.messenger
        self.truth = metering.truth
        """Per-route token corrections: learned by metering, used by budgets and checks."""
        self.clock = bubbles.clock
        self.tools = calls.tools
        """The live tool table (name → tool), shared by every part."""

    @property
    def compactor(self) -> Compactor | None:
        return self.windows.compactor

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
        task: TaskInstruction | None = None,
    ) -> TurnState:
        """Everything up to the first provider call: the turn's window opened
        (`Windows.open`) and the request laid out around it. `persist_window=False`
        previews (`tgbot context show`): nothing is stored and no model is called."""
        window = await self.windows.open(
            session, turn_id=turn_id, told_user=told_user, persist=persist_window, task=task
        )
        state = TurnState(turn_id=turn_id, window=window, task=task)
        state.lay_out(self.request)
        return state

    async def run_turn(
        self,
        session: SessionInfo,
        *,
        reply_to: int | None,
        told_user: Sequence[str] = (),
        task: TaskInstruction | None = None,
        trigger: str | None = None,
    ) -> TurnOutcome:
        """Answer the session's newest message; with `task`, run a scheduled task instead:
        no member's message is current, the instruction rides in the per-turn blocks (never
        stored), the calls are ledgered `purpose: job` and charged to its creator, and a
        failure is left to the caller to tell (the chat hears nothing of it). `trigger`
        (what started the turn; a task's is `job`) goes into its outcome, for its log line."""
        turn_id = new_turn_id()
        with self.observer.turn(session, turn_id) as watch:
            key = session.key
            async with self.presence.typing(key.chat_id, key.thread_id) as typing:
                outcome = await self._run_turn(
                    session, turn_id, reply_to, told_user, typing, task=task
                )
            if trigger is None and task is not None:
                trigger = "job"
            if trigger is not None:
                outcome = replace(outcome, trigger=trigger)
            watch.ended(outcome)
            return outcome

    async def _run_turn(
        self,
        session: SessionInfo,
        turn_id: str,
        reply_to: int | None,
        told_user: Sequence[str],
        typing: Typing | None,
        *,
        task: TaskInstruction | None = None,
    ) -> TurnOutcome:
        key = session.key
        if not told_user and self.told is not None:
            told_user = await self.told.peek(key.chat_id, key.thread_id)
        state = await self.prepare(session, turn_id=turn_id, told_user=told_user, task=task)
        aliases, records = state.window.aliases, list(state.window.records)
        state.requester = task.creator_id if task is not None else requester_of(records)
        try:
            async with asyncio.timeout(self.policy.turn_deadline_seconds):
                return await self._steps(
                    state, aliases, records, reply_to, turn_id, told_user, typing
                )
        except TimeoutError:
            failure = TurnFailed(
                "provider", f"the turn took longer than {self.policy.turn_deadline_seconds:g} s"
            )
            capped = False
        except TurnFailed as failed:
            failure, capped = failed, state.iteration > self.policy.max_tool_iterations
        log.warning("turn %s failed: %s", turn_id, failure.detail)
        return await failed_turn(
            state,
            failure,
            reply_to=reply_to,
            typing=typing,
            hit_cap=capped,
            messenger=self.messenger,
            told=self.told,
            locale_of=self.policy.prompt.locale_of,
        )

    async def _steps(
        self,
        state: TurnState,
        aliases: AliasTable,
        records: Sequence[StoredRecord],
        reply_to: int | None,
        turn_id: str,
        told_user: Sequence[str],
        typing: Typing | None,
    ) -> TurnOutcome:
        session = state.window.session
        key = session.key
        private = session.scene != "group"
        # where the turn's tools act, over the window as the turn began: built at the first
        # tool call (most turns make none), then kept for the turn
        tool_ctx: ToolContext | None = None
        while True:
            state.iteration += 1
            hit_cap = state.iteration > self.policy.max_tool_iterations
            # one draft id per reply: each model call may be the one that answers
            draft = self.presence.draft(key.chat_id, key.thread_id, private=private)
            response = await self.calls.call(state, final=hit_cap, on_text=draft)
            if response.stop == "refusal":
                # not asked again (it would refuse again, and bill again); any text it wrote
                # before refusing is not an answer and is not delivered
                why = response.refusal or "no reason given"
                raise TurnFailed("refusal", f"the model refused: {why}")
            if response.tool_calls and not hit_cap:
                if tool_ctx is None:
                    tool_ctx = self._tool_context(state, records)
                await self.tool_runner.run_calls(state, response, aliases, tool_ctx)
                if tool_ctx.erased:  # deleted now: not in this turn's next calls either
                    if await self.windows.folds.forget(state.window, frozenset(tool_ctx.erased)):
                        state.lay_out(self.request)
                    tool_ctx.erased.clear()
                if tool_ctx.forgotten:  # forgotten now: not in this turn's next calls
                    if await self.windows.folds.forget_facts(
                        state.window, frozenset(tool_ctx.forgotten)
                    ):
                        state.lay_out(self.request)
                    tool_ctx.forgotten.clear()
                continue
            if response.tool_calls and not response.text.strip():
                # a provider that ignores tool_choice "none": its calls are not run
                raise TurnFailed("bad_response", "the model called tools at the iteration cap")
            outcome = await self._deliver(state, response, reply_to, hit_cap, typing)
            if outcome.status == "answered":
                self.request.reactions_answered(session.id)
                if self.told is not None:
                    await self.told.shown(key.chat_id, key.thread_id, told_user)
            if state.window.fold_soon:  # the next window move is near: prepare its summary
                self.windows.folds.prepare_next(session, turn_id=turn_id)
            return outcome

    def _tool_context(self, state: TurnState, records: Sequence[StoredRecord]) -> ToolContext:
        """Where the turn's tools act; a scheduled task's act with its creator's rights."""
        ctx = self.tool_runner.context(state.window.session, records, route=state.window.route)
        if state.task is None or ctx.rights is None:
            return ctx
        return replace(ctx, rights=replace(ctx.rights, requester_id=state.requester))

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
        key = state.window.session.key
        if response.stop == "length":  # cut at the output limit: say so, stored as shown
            marker = user_text(self.policy.prompt.locale_of(key.chat_id), "cut_marker")
            text = f"{text}\n\n{marker}"
        recorder = self.bubbles.recorder(state.window.session, reply_to, text, response.reasoning)
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
            requester=state.requester,
        )

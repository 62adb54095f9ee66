"""The turn runner, built from its parts (the composition root's share of a turn).

Each part gets only what it reads: the window (`Windows`), the prompt and layout
(`RequestBuilder`), the one model caller (`ModelCaller`, shared by the turn's calls and the
summary calls, so both read and write one cache and publish one kind of `ModelCalled`),
the tools (`ToolRunner`), the reply (`ReplyBubbles`), "typing…" (`Presence`) and metering.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.agent.chat_scope import NO_SCOPES, ChatScopes
from bot.agent.compactor import Compactor
from bot.agent.events import NO_OBSERVER, EventBus, TurnObserver
from bot.agent.ledger_file import LedgerWriter
from bot.agent.metering import CallMetering, TokenTruth
from bot.agent.model_call import ModelCaller
from bot.agent.provider_call import ProviderCaller, SpendCheck
from bot.agent.reply import ChatActions, Presence, ReplyBubbles
from bot.agent.request import RequestBuilder
from bot.agent.routes import RouteTable
from bot.agent.runtime import TurnRunner
from bot.agent.tool_runner import ToolRunner
from bot.agent.turn import TurnPolicy
from bot.agent.turn_images import TurnImages
from bot.agent.window import Windows
from bot.context.memory_block import MemoryLimits
from bot.ports import Clock, Messenger, ToldUserNotes
from bot.store_ports import ConversationStore, MemoryFacts
from bot.tools.base import Tool


def build_turn_runner(
    *,
    store: ConversationStore,
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
    chat_actions: ChatActions | None = None,
    stream_drafts: bool = True,
    observer: TurnObserver = NO_OBSERVER,
    spend: SpendCheck | None = None,
    images: TurnImages | None = None,
    scopes: ChatScopes = NO_SCOPES,
    memory: MemoryFacts | None = None,
    memory_limits: MemoryLimits | None = None,
) -> TurnRunner:
    """A `TurnRunner` over `store`, answering through `messenger`."""
    bus = bus or EventBus()
    truth = truth if truth is not None else TokenTruth()
    table = {tool.spec.name: tool for tool in tools}  # the live tool table, shared
    calls = policy.calls
    caller = ModelCaller(
        bus=bus,
        clock=clock,
        limits=calls.limits,
        deadline_seconds=calls.deadline_seconds,
        chains=routes.chains,
        correction=truth.correction,
    )
    compactor = None
    if policy.compaction is not None:
        compactor = Compactor(
            store=store,
            routes=routes,
            tools=table,
            caller=caller,
            clock=clock,
            policy=policy.compaction,
            correction=truth.correction,
            scopes=scopes,
        )
    prompt = RequestBuilder(
        tools=table,
        clock=clock,
        policy=policy.prompt,
        bot_id=bot_id,
        bot_name=bot_name,
        aliases=store,
        reactions=store,
        images=images,
        scopes=scopes,
        memory=memory,
        memory_limits=memory_limits,
    )
    windows = Windows(
        store=store,
        routes=routes,
        prompt=prompt,
        policy=policy.window,
        runtime=calls.limits,
        correction=truth.correction,
        compactor=compactor,
    )
    tool_runner = ToolRunner(
        tools=table,
        store=store,
        platform_messages=store,
        messenger=messenger,
        clock=clock,
        bot_id=bot_id,
        bot_name=bot_name,
        max_result_chars=policy.tools.max_result_chars,
        owner_id=policy.prompt.owner_id,
        max_calls_per_step=policy.tools.max_calls_per_step,
        max_messages_per_turn=policy.tools.max_messages_per_turn,
        search=store,
        zone=policy.prompt.zone,
        observer=observer,
        media_files=images.files if images is not None else None,
        eraser=store,
        scopes=scopes,
        memory=memory,
        memory_limits=memory_limits,
    )
    return TurnRunner(
        windows=windows,
        calls=ProviderCaller(
            caller=caller,
            windows=windows,
            tools=table,
            layout=prompt,
            max_output_tokens=calls.max_output_tokens,
            spend=spend,
        ),
        tool_runner=tool_runner,
        bubbles=ReplyBubbles(
            messenger=messenger,
            store=store,
            platform_messages=store,
            clock=clock,
            bot_id=bot_id,
            bot_name=bot_name,
        ),
        presence=Presence(chat_actions, drafts=stream_drafts),
        metering=CallMetering(ledger, truth=truth).attach(bus),
        policy=policy,
        told=told,
    )

"""Settings turned into the plain policy values the services take (no adapter, no store).

`bot.app.wiring` builds the object graph from these; the dashboard reads the window and spend
policies through them too, so both see the same limits.
"""

from __future__ import annotations

from bot.agent.compactor import CompactionPolicy
from bot.agent.request import PromptPolicy
from bot.agent.spend import DEFAULT_OUTPUT_BOUND, ChatLimits, SpendPolicy
from bot.agent.spend_counters import Limit, nanos
from bot.agent.turn import CallPolicy, ToolPolicy, TurnPolicy
from bot.agent.window_state import SceneCaps, WindowPolicy
from bot.app.retention_loop import RetentionPolicy
from bot.config import ChatLimitSettings, SceneHistory, Settings
from bot.context.memory_block import MemoryLimits
from bot.context.window import PerScene, RuntimeLimits, bound_summaries
from bot.errors import ConfigError
from bot.services.chat_events import ChatEventPolicy
from bot.services.inbound_rules import InboundPolicy
from bot.services.recovery import RecoveryPolicy
from bot.services.send_pacing import PaceLimits
from bot.texts import ChatLocales


def window_policy(settings: Settings) -> WindowPolicy:
    """Each scene's window: the history budgets and the caps, overrides applied."""
    history = settings.history

    def caps(override: SceneHistory) -> SceneCaps:
        return SceneCaps(
            max_turns=history.max_history_turns
            if override.max_history_turns is None
            else override.max_history_turns,
            max_messages=history.max_recent_messages
            if override.max_recent_messages is None
            else override.max_recent_messages,
        )

    return WindowPolicy(
        history_budgets=PerScene(
            group=history.group_tokens,
            private=history.private_tokens,
            owner=history.owner_tokens,
        ),
        caps=PerScene(
            group=caps(history.group), private=caps(history.private), owner=caps(history.owner)
        ),
        headroom=history.headroom,
        count_unanswered_turns=history.turn_cap_counts == "all",
    )


def chat_locales(settings: Settings) -> ChatLocales:
    """`BOT_LOCALE=auto`: each member's language, a chat its members'; `zh`/`en`: fixed."""
    fixed = None if settings.bot_locale == "auto" else settings.bot_locale
    return ChatLocales(fixed=fixed, fallback=settings.fallback_locale)


def turn_policy(settings: Settings, locales: ChatLocales | None = None) -> TurnPolicy:
    rules = ""
    if settings.workspace_rules_file is not None:
        try:
            rules = settings.workspace_rules_file.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError("workspace_rules_file", str(exc)) from None
    runtime = settings.runtime
    compaction = settings.compaction
    window = window_policy(settings)
    limits = RuntimeLimits(
        max_context_tokens=runtime.max_context_tokens,
        context_compact_ratio=runtime.context_compact_ratio,
        history_pruning_enabled=runtime.history_pruning.enabled,
        history_pruning_max_tokens=runtime.history_pruning.max_tokens,
    )
    summaries = PerScene(
        group=compaction.group_tokens,
        private=compaction.private_tokens,
        owner=compaction.owner_tokens,
    )
    return TurnPolicy(
        window=window,
        prompt=PromptPolicy(
            zone=settings.zone,
            zone_name=settings.bot_timezone,
            locale=settings.fallback_locale,
            command_prefix=settings.triggers.command_prefix,
            workspace_rules=rules,
            owner_id=settings.owner_id,
            chat_locale=locales.for_chat if locales is not None else None,
            member_locale=locales.member_language if locales is not None else None,
        ),
        calls=CallPolicy(
            limits=limits,
            max_output_tokens=runtime.max_output_tokens,
            deadline_seconds=runtime.model_call_deadline_seconds,
        ),
        tools=ToolPolicy(
            max_result_chars=runtime.max_tool_result_chars,
            max_calls_per_step=runtime.max_tool_calls_per_step,
            max_messages_per_turn=runtime.max_messages_per_turn,
        ),
        compaction=CompactionPolicy(
            summary_budgets=bound_summaries(summaries, window.history_budgets),
            route=compaction.route,
            prepare_margin=compaction.prepare_margin,
        )
        if compaction.enabled
        else None,
        max_tool_iterations=runtime.max_tool_iterations,
        turn_deadline_seconds=runtime.turn_deadline_seconds,
    )


def spend_policy(settings: Settings, locales: ChatLocales | None = None) -> SpendPolicy:
    """`[limits]` resolved: the shared limits, each scene's and each chat id's overrides."""
    limits = settings.limits

    def chat_limits(override: ChatLimitSettings, base: ChatLimits) -> ChatLimits:
        def pick(value: float | None, fallback: int, scale: bool) -> int:
            if value is None:
                return fallback
            return nanos(value) if scale else int(value)

        return ChatLimits(
            chat=Limit(
                cost=pick(override.chat_daily_cost, base.chat.cost, True),
                tokens=pick(override.chat_daily_tokens, base.chat.tokens, False),
            ),
            member=Limit(
                cost=pick(override.member_daily_cost, base.member.cost, True),
                tokens=pick(override.member_daily_tokens, base.member.tokens, False),
            ),
        )

    shared = ChatLimits(
        chat=Limit(cost=nanos(limits.chat_daily_cost), tokens=limits.chat_daily_tokens),
        member=Limit(cost=nanos(limits.member_daily_cost), tokens=limits.member_daily_tokens),
    )
    scenes = PerScene(
        group=chat_limits(limits.group, shared),
        private=chat_limits(limits.private, shared),
        owner=chat_limits(limits.owner, shared),
    )
    # a chat id's override sits over its scene's; a group id is negative, a private
    # chat's is its member's id
    chats = {
        int(chat): chat_limits(override, scenes.group if int(chat) < 0 else scenes.private)
        for chat, override in limits.chats.items()
    }
    return SpendPolicy(
        daily=Limit(cost=nanos(limits.daily_cost), tokens=limits.daily_tokens),
        monthly=Limit(cost=nanos(limits.monthly_cost), tokens=limits.monthly_tokens),
        scenes=scenes,
        chats=chats,
        owner_id=settings.owner_id,
        owner_exempt=limits.owner_exempt,
        zone=settings.zone,
        zone_name=settings.bot_timezone,
        locale=settings.fallback_locale,
        chat_locale=locales.for_chat if locales is not None else None,
        currency=settings.ledger.currency,
        output_bound=settings.runtime.max_output_tokens or DEFAULT_OUTPUT_BOUND,
        hold_wait_seconds=settings.runtime.model_call_deadline_seconds,
    )


def pace_limits(settings: Settings) -> PaceLimits:
    """Telegram's send limits (`[telegram] per_chat_per_second`, `per_group_per_minute`,
    `per_bot_per_second`), kept where the topology keeps them."""
    return PaceLimits(
        per_chat_per_second=settings.telegram.per_chat_per_second,
        per_group_per_minute=settings.telegram.per_group_per_minute,
        per_bot_per_second=settings.telegram.per_bot_per_second,
    )


def retention_policy(settings: Settings) -> RetentionPolicy:
    return RetentionPolicy(
        keep_records_days=settings.retention.keep_records_days,
        keep_platform_events_days=settings.retention.keep_platform_events_days,
    )


def inbound_policy_of(settings: Settings) -> InboundPolicy:
    """Who owns the bot, which chats it serves, how it answers in groups (`[triggers]`,
    `[security]`)."""
    return InboundPolicy(
        owner_id=settings.owner_id,
        locale=settings.fallback_locale,
        answer_on_mention=settings.triggers.answer_on_mention,
        answer_on_reply=settings.triggers.answer_on_reply,
        answer_on_command=settings.triggers.answer_on_command,
        merge_window_seconds=settings.triggers.merge_window_seconds,
        allowed_chats=tuple(settings.security.allowed_chats),
        private_chats=settings.security.private_chats_in_effect,
        user_messages_per_minute=settings.security.user_messages_per_minute,
        chat_messages_per_minute=settings.security.chat_messages_per_minute,
    )


def recovery_policy(inbound: InboundPolicy, locales: ChatLocales) -> RecoveryPolicy:
    """Crash recovery answers by the live path's rules."""
    return RecoveryPolicy(
        locale=inbound.locale,
        chat_locale=locales.for_chat,
        rules=inbound.rules,
        allowed_chats=inbound.allowed_chats,
        private_chats=inbound.private_chats,
        owner_id=inbound.owner_id,
    )


def chat_event_policy(settings: Settings, bot_id: int | None) -> ChatEventPolicy:
    return ChatEventPolicy(
        owner_id=settings.owner_id,
        bot_id=bot_id,
        allowed_chats=tuple(settings.security.allowed_chats),
        private_chats=settings.security.private_chats_in_effect,
    )


def memory_limits(settings: Settings) -> MemoryLimits:
    """`[memory]`: the `[Memory]` block's size and the caps on kept facts."""
    memory = settings.memory
    return MemoryLimits(
        max_tokens=memory.max_tokens,
        per_member=memory.per_member,
        per_chat=memory.per_chat,
        max_fact_chars=memory.max_fact_chars,
    )

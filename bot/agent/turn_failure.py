"""A turn that failed: the chat told so (a short notice in its language), the outcome that
says why.

`bot.agent.runtime.TurnRunner` ends a turn here when the provider failed, a budget was
spent, the tool rounds ran out or the turn ran past its deadline (`TurnFailed`); a turn that
answers never comes here.
"""

from __future__ import annotations

from collections.abc import Callable

from bot.agent.events import TurnOutcome
from bot.agent.reply import Typing
from bot.agent.turn import TurnFailed, TurnState
from bot.domain.ids import Locale
from bot.ports import Messenger, ToldUserNotes
from bot.texts import text as user_text


async def failed_turn(
    state: TurnState,
    failure: TurnFailed,
    *,
    reply_to: int | None,
    typing: Typing | None,
    hit_cap: bool,
    messenger: Messenger,
    told: ToldUserNotes | None,
    locale_of: Callable[[int | None], Locale],
) -> TurnOutcome:
    """Tell the chat the turn failed (a short notice in its language, in reply to
    `reply_to`, noted in `told` once delivered: the model never wrote it); its outcome."""
    session = state.window.session
    key = session.key
    if typing is not None:
        await typing.stop()
    # e.g. a spent budget the chat was already told of; a scheduled task's failure is
    # recorded with its run and told to its creator (`bot.services.jobs`)
    if failure.silent or state.task is not None:
        return TurnOutcome(
            status="failed",
            iterations=state.iteration,
            hit_iteration_cap=hit_cap,
            error=failure.detail,
            failure=failure.key,
            requester=state.requester,
        )
    text = failure.notice or user_text(locale_of(key.chat_id), failure.key)
    delivery = await messenger.send_text(
        key.chat_id, text, thread_id=key.thread_id, reply_to=reply_to
    )
    if told is not None and delivery.delivered:  # the model never wrote it
        await told.note(key.chat_id, key.thread_id, text)
    return TurnOutcome(
        status="failed",
        text=text,
        delivery=delivery,
        iterations=state.iteration,
        hit_iteration_cap=hit_cap,
        error=failure.detail,
        failure=failure.key,
        requester=state.requester,
    )

"""Running the model's tool calls: aliases rewritten first, every failure a tool result.

A tool never sees a message alias: its arguments are rewritten to platform ids through the
turn's alias table, and a reference the model was not shown is refused before the tool
runs. Whatever goes wrong (unknown tool, bad arguments, a `ToolError`, a Telegram error, a
timeout, a bug) becomes an error result the model reads, never a crashed turn. The call and
its results are stored together.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping, Sequence

from bot.agent.turn import TurnState
from bot.context.alias_table import AliasTable
from bot.context.projection import current_record_index, record_tokens
from bot.context.tokens import ensure_token_estimate
from bot.context.tool_results import truncate_tool_result
from bot.domain.messages import ChatMessage, ToolCall
from bot.domain.records import (
    AssistantRecord,
    StoredRecord,
    ToolResult,
    ToolResultsRecord,
    UserRecord,
)
from bot.errors import ReferenceNotConfirmed, TelegramError, ToolError
from bot.ports import (
    Clock,
    HistoryStore,
    LLMResponse,
    Messenger,
    NewRecord,
    PlatformMessageStore,
    SessionInfo,
)
from bot.tools.base import Tool, ToolContext
from bot.tools.rights import ChatAdmins, MemberRights

log = logging.getLogger("tgbot.runtime")

TOOL_TIMEOUT_SECONDS = 30.0


class ToolRunner:
    """Runs tool calls in the current chat. `tools` is the runner's live tool table."""

    def __init__(
        self,
        *,
        tools: Mapping[str, Tool],
        store: HistoryStore,
        platform_messages: PlatformMessageStore,
        messenger: Messenger,
        clock: Clock,
        bot_id: int | None,
        bot_name: str,
        max_result_chars: int,
        owner_id: int | None = None,
    ) -> None:
        self.tools = tools
        self.store = store
        self.platform_messages = platform_messages
        self.messenger = messenger
        self.clock = clock
        self.bot_id = bot_id
        self.bot_name = bot_name
        self.max_result_chars = max_result_chars
        self.owner_id = owner_id
        self.admins = ChatAdmins(messenger=messenger, clock=clock)
        """Who administers which chat, cached briefly across turns."""

    def context(self, session: SessionInfo, records: Sequence[StoredRecord]) -> ToolContext:
        """Where the turn's tools act: its chat, with the window's records and the rights of
        the member whose message the turn answers."""
        current = current_record_index(records)
        body = records[current].body if current is not None else None
        requester = body.sender.id if isinstance(body, UserRecord) else None
        rights = MemberRights(
            requester_id=requester, owner_id=self.owner_id, bot_id=self.bot_id, admins=self.admins
        )
        return ToolContext(
            chat_id=session.key.chat_id,
            thread_id=session.key.thread_id,
            bot_id=self.bot_id,
            bot_name=self.bot_name,
            clock=self.clock,
            messenger=self.messenger,
            platform_messages=self.platform_messages,
            records=records,
            record_bubbles=self.platform_messages.record_platform_messages,
            rights=rights,
        )

    async def run_calls(
        self, state: TurnState, response: LLMResponse, aliases: AliasTable, ctx: ToolContext
    ) -> None:
        """Run every call of `response` in order, store the call with its results, and add
        both to the turn's request."""
        results = [await self.run(call, aliases, ctx) for call in response.tool_calls]
        now = self.clock.now()
        call_body = AssistantRecord(text=response.text, tool_calls=response.tool_calls)
        results_body = ToolResultsRecord(results=tuple(results))
        await self.store.append(
            state.session.id,
            [
                NewRecord(body=call_body, created_at=now, tokens=record_tokens(call_body)),
                NewRecord(body=results_body, created_at=now, tokens=record_tokens(results_body)),
            ],
        )
        state.messages.append(
            ensure_token_estimate(
                ChatMessage(role="assistant", content=response.text, tool_calls=response.tool_calls)
            )
        )
        for result in results:
            state.messages.append(
                ensure_token_estimate(
                    ChatMessage(
                        role="tool",
                        content=result.content,
                        tool_call_id=result.call_id,
                        name=result.name,
                        is_error=result.is_error,
                    )
                )
            )

    async def run(self, call: ToolCall, aliases: AliasTable, ctx: ToolContext) -> ToolResult:
        """One call's result; a failure is an error result (`error[<code>]: …`)."""

        def failed(code: str, message: str) -> ToolResult:
            return ToolResult(
                call_id=call.id,
                name=call.name,
                content=f"error[{code}]: {message}",
                is_error=True,
                error_code=code,
            )

        tool = self.tools.get(call.name)
        if tool is None:
            return failed("unknown_tool", f"there is no tool named {call.name!r}")
        try:
            raw = json.loads(call.arguments or "{}")
        except json.JSONDecodeError:
            return failed("bad_arguments", "the arguments are not valid JSON")
        if not isinstance(raw, dict):
            return failed("bad_arguments", "the arguments must be a JSON object")
        try:
            args = aliases.rewrite_arguments(raw)
        except ReferenceNotConfirmed as exc:
            log.info("tool %s: %s (model wrote %s)", call.name, exc, call.arguments)
            return failed("reference_not_confirmed", str(exc))
        log.info("tool %s(%s)", call.name, call.arguments)
        try:
            content = await asyncio.wait_for(tool.run(args, ctx), TOOL_TIMEOUT_SECONDS)
        except ToolError as exc:
            return failed(exc.code, str(exc))
        except TelegramError as exc:
            return failed("telegram", f"{type(exc).__name__}: {exc}")
        except TimeoutError:
            return failed("timeout", f"the tool took longer than {TOOL_TIMEOUT_SECONDS:.0f} s")
        except Exception as exc:  # a tool bug must not crash the turn
            log.exception("tool %s crashed", call.name)
            return failed("internal", type(exc).__name__)
        return ToolResult(
            call_id=call.id,
            name=call.name,
            content=truncate_tool_result(content, self.max_result_chars),
        )

"""Running the model's tool calls: aliases rewritten first, every failure a tool result.

A tool never sees a message alias: its arguments are rewritten to platform ids through the
turn's alias table, and a reference the model was not shown is refused before the tool
runs. Whatever goes wrong (unknown tool, bad arguments, a `ToolError`, a Telegram error, a
timeout, a bug) becomes an error result the model reads, never a crashed turn. The call and
its results are stored together.

Two caps keep one mention from flooding a chat (the iteration cap alone limits steps, not
calls): at most `max_calls_per_step` calls of one model response run, and at most
`max_messages_per_turn` messages are posted by tools in one turn (the final answer is not
counted: it is the turn's reply). A call over either cap is not run; its result is an error
the model reads (`error[too_many_calls]` / `error[too_many_messages]`), so it can fold the
rest into its answer. 0 switches a cap off.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, tzinfo

from bot.agent.chat_scope import NO_SCOPES, ChatScopes
from bot.agent.events import NO_OBSERVER, TurnObserver
from bot.agent.routes import ModelRoute
from bot.agent.turn import TurnState, requester_of
from bot.context.alias_table import AliasTable
from bot.context.bounded_json import JsonTooDeep, JsonTooLarge, loads_bounded
from bot.context.memory_block import MemoryLimits
from bot.context.projection import record_tokens
from bot.context.tokens import ensure_token_estimate
from bot.context.tool_results import (
    DEFAULT_MAX_TOOL_RESULT_CHARS,
    shorten,
    tool_result_message,
    truncate_tool_result,
)
from bot.domain.messages import ChatMessage, ImagePart, ToolCall
from bot.domain.records import (
    AssistantRecord,
    StoredRecord,
    ToolResult,
    ToolResultsRecord,
)
from bot.errors import ReferenceNotConfirmed, TelegramError, ToolError
from bot.ports import Clock, LLMResponse, MediaFiles, Messenger, NewRecord, SessionInfo
from bot.redact import scrub
from bot.store_ports import HistorySearch, HistoryStore, MemoryFacts, PlatformMessages
from bot.tools.base import ShownByTool, Tool, ToolContext, ToolMedia
from bot.tools.rights import ChatAdmins, MemberRights

log = logging.getLogger("tgbot.runtime")

MAX_ARGUMENT_CHARS = 64_000
"""Longest tool arguments run (a Telegram message is 4,096 characters; a model that writes
a megabyte of arguments gets an error, not a failed turn)."""
MAX_ARGUMENT_DEPTH = 32
"""Deepest nesting of tool arguments decoded (ours nest two or three levels)."""
OVERSIZED_ARGUMENTS_KEY = "arguments_omitted"


def bounded_call(call: ToolCall) -> ToolCall:
    """The call as stored and replayed: arguments over `MAX_ARGUMENT_CHARS` keep their start
    and a note of how much was cut, like an old tool result, wrapped in a JSON object so the
    replayed call stays valid JSON; later requests stay small."""
    if len(call.arguments) <= MAX_ARGUMENT_CHARS:
        return call
    cut = json.dumps({OVERSIZED_ARGUMENTS_KEY: shorten(call.arguments, "en")}, ensure_ascii=False)
    return ToolCall(id=call.id, name=call.name, arguments=cut)


TOOL_TIMEOUT_SECONDS = 30.0

SENDING_TOOLS = frozenset({"send_message"})
"""Tools that post a new message to the chat (counted against `max_messages_per_turn`)."""


def _failed(call: ToolCall, code: str, message: str) -> ToolResult:
    return ToolResult(
        call_id=call.id,
        name=call.name,
        content=message,  # `tool_result_message` adds `error[<code>]: ` where the model reads it
        is_error=True,
        error_code=code,
    )


_CAPPED = frozenset({"too_many_calls", "too_many_messages"})


class ToolRunner:
    """Runs tool calls in the current chat. `tools` is the runner's live tool table."""

    def __init__(
        self,
        *,
        tools: Mapping[str, Tool],
        store: HistoryStore,
        platform_messages: PlatformMessages,
        messenger: Messenger,
        clock: Clock,
        bot_id: int | None,
        bot_name: str,
        max_result_chars: int,
        owner_id: int | None = None,
        max_calls_per_step: int = 0,
        max_messages_per_turn: int = 0,
        search: HistorySearch | None = None,
        zone: tzinfo = UTC,
        observer: TurnObserver = NO_OBSERVER,
        media_files: MediaFiles | None = None,
        eraser: PlatformMessages | None = None,
        scopes: ChatScopes = NO_SCOPES,
        memory: MemoryFacts | None = None,
        memory_limits: MemoryLimits | None = None,
    ) -> None:
        self.scopes = scopes
        self.memory = memory
        """The facts `remember` and `forget` keep (None: memory is off)."""
        self.memory_limits = memory_limits or MemoryLimits()
        self.observer = observer
        self.media_files = media_files
        """Members' files for `view_image` and `read_document`; None: not available."""
        self._shown: dict[str, tuple[ImagePart, ...]] = {}
        """Images a call returned, by call id, until its result joins the request."""
        self.eraser = eraser
        self.search = search
        self.zone = zone
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
        self.max_calls_per_step = max_calls_per_step
        self.max_messages_per_turn = max_messages_per_turn

    def context(
        self,
        session: SessionInfo,
        records: Sequence[StoredRecord],
        *,
        route: ModelRoute | None = None,
    ) -> ToolContext:
        """Where the turn's tools act: its chat, with the window's records and the rights of
        the member whose message the turn answers; `route` says whether images can be
        shown to its model, and how they are sized."""
        rights = MemberRights(
            requester_id=requester_of(records),
            owner_id=self.owner_id,
            bot_id=self.bot_id,
            admins=self.admins,
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
            session_id=session.id,
            zone=self.zone,
            search=self.search,
            history=self.store,
            scene=session.scene,
            media=ToolMedia(
                files=self.media_files,
                wire=route.wire if route is not None else "openai",
                vision=route.vision if route is not None else False,
                max_result_chars=self.max_result_chars or DEFAULT_MAX_TOOL_RESULT_CHARS,
            ),
            eraser=self.eraser,
            memory=self.memory,
            memory_limits=self.memory_limits,
        )

    async def run_calls(
        self, state: TurnState, response: LLMResponse, aliases: AliasTable, ctx: ToolContext
    ) -> None:
        """Run every call of `response` in order, store the call with its results, and add
        both to the turn's request. Calls over the caps are answered with an error."""
        results: list[ToolResult] = []
        sent = self.sent_this_turn(state)
        per_step = self.max_calls_per_step
        per_turn = self.max_messages_per_turn
        for index, call in enumerate(response.tool_calls):
            with self.observer.tool_call(call) as watch:
                if per_step and index >= per_step:
                    result = _failed(
                        call,
                        "too_many_calls",
                        f"not run: at most {per_step} tool calls per step; "
                        "repeat it in a later step only if it is still needed",
                    )
                elif per_turn and call.name in SENDING_TOOLS and sent >= per_turn:
                    result = _failed(
                        call,
                        "too_many_messages",
                        f"not sent: at most {per_turn} messages per turn; "
                        "put what is left into your final answer",
                    )
                else:
                    result = await self.run(call, aliases, ctx)
                    if call.name in SENDING_TOOLS and not result.is_error:
                        sent += 1
                watch.ended(result)
            results.append(result)
        if capped := sum(r.error_code in _CAPPED for r in results):
            log.warning("turn %s: %d tool calls over the caps", state.turn_id, capped)
        now = self.clock.now()
        calls = tuple(
            bounded_call(self.stored_call(call, result))
            for call, result in zip(response.tool_calls, results, strict=True)
        )
        call_body = AssistantRecord(
            text=response.text, tool_calls=calls, reasoning=response.reasoning
        )
        results_body = ToolResultsRecord(results=tuple(results))
        await self.store.append(
            state.window.session.id,
            [
                NewRecord(body=call_body, created_at=now, tokens=record_tokens(call_body)),
                NewRecord(body=results_body, created_at=now, tokens=record_tokens(results_body)),
            ],
        )
        state.messages.append(
            ensure_token_estimate(
                ChatMessage(
                    role="assistant",
                    content=response.text,
                    tool_calls=calls,
                    reasoning=response.reasoning,
                )
            )
        )
        for result in results:
            message = tool_result_message(result)
            images = self._shown.pop(result.call_id, ())
            if images and not result.is_error:
                # the image rides on this turn's result only; storage keeps the line
                sizes = ", ".join(f"{i.width}x{i.height}" for i in images)
                message = replace(
                    message, content=f"{message.content} ({sizes}, attached)", images=images
                )
            state.messages.append(ensure_token_estimate(message))

    def stored_call(self, call: ToolCall, result: ToolResult) -> ToolCall:
        """The call as stored and replayed (`Tool.stored_call`; unchanged for most tools)."""
        tool = self.tools.get(call.name)
        if tool is None or tool.stored_call is None:
            return call
        return tool.stored_call(call, result)

    @staticmethod
    def sent_this_turn(state: TurnState) -> int:
        """Messages tools posted so far in this turn (read from the turn's own request)."""
        return sum(
            1
            for message in state.messages[state.layout.current_index :]
            if message.role == "tool" and message.name in SENDING_TOOLS and not message.is_error
        )

    def _offered(self, name: str, ctx: ToolContext) -> Tool | None:
        """The tool, when this turn's request offered it: not one of another scene (the
        model was never shown it), nor one the chat denies (`[chats."<id>".tools]`)."""
        tool = self.tools.get(name)
        if tool is not None and tool.scenes is not None and ctx.scene not in tool.scenes:
            return None
        if tool is not None and not self.scopes.of(ctx.chat_id, ctx.thread_id).offers(name):
            return None
        return tool

    async def run(self, call: ToolCall, aliases: AliasTable, ctx: ToolContext) -> ToolResult:
        """One call's result; a failure is an error result (`error[<code>]: …`)."""

        def failed(code: str, message: str) -> ToolResult:
            return _failed(call, code, message)

        tool = self._offered(call.name, ctx)
        if tool is None:
            return failed("unknown_tool", f"there is no tool named {call.name!r}")
        try:
            raw = loads_bounded(
                call.arguments or "{}", max_depth=MAX_ARGUMENT_DEPTH, max_chars=MAX_ARGUMENT_CHARS
            )
        except JsonTooLarge:
            return failed(
                "bad_arguments",
                f"the arguments are {len(call.arguments)} characters, over the limit of "
                f"{MAX_ARGUMENT_CHARS}; send less (split it, or put the text in your answer)",
            )
        except JsonTooDeep:
            return failed(
                "bad_arguments", f"the arguments nest more than {MAX_ARGUMENT_DEPTH} levels deep"
            )
        except json.JSONDecodeError:
            return failed("bad_arguments", "the arguments are not valid JSON")
        if not isinstance(raw, dict):
            return failed("bad_arguments", "the arguments must be a JSON object")
        try:
            if tool.reference_params is None:
                args = aliases.rewrite_arguments(raw)
            else:
                args = aliases.rewrite_named(raw, tool.reference_params)
        except ReferenceNotConfirmed as exc:
            log.info("tool %s: %s (model wrote %s)", call.name, exc, call.arguments)
            return failed("reference_not_confirmed", str(exc))
        log.info("tool %s(%s)", call.name, call.arguments)
        timeout = tool.timeout_seconds or TOOL_TIMEOUT_SECONDS
        media = replace(ctx.media, shown=[]) if ctx.media is not None else None
        try:
            shown = ShownByTool(aliases)  # what it shows is kept with its result
            run = tool.run(args, replace(ctx, shown=shown, media=media))
            content = await asyncio.wait_for(run, timeout)
        except ToolError as exc:
            return failed(exc.code, str(exc))
        except TelegramError as exc:
            return failed("telegram", scrub(f"{type(exc).__name__}: {exc}"))
        except TimeoutError:
            return failed("timeout", f"the tool took longer than {timeout:g} s")
        except Exception as exc:  # a tool bug must not crash the turn
            log.exception("tool %s crashed", call.name)
            return failed("internal", type(exc).__name__)
        if media is not None and media.shown:
            self._shown[call.id] = tuple(media.shown)
        return ToolResult(
            call_id=call.id,
            name=call.name,
            content=truncate_tool_result(content, self.max_result_chars),
            shown=tuple(shown.aliases),
            shown_references=tuple(shown.references),
            content_of=tuple(shown.carried),
        )

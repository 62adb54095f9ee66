"""Runtime paths that only fire in production, driven through real turns.

Each test runs the app `build_app` wires (via the shared rig) against `FakeBotApi` over real
HTTP with aiogram's own client, a real SQLite file, and the scripted model (in-process, or
behind `FakeOpenAIServer` over HTTP when the wire matters). Assertions read what the model
was sent, what Telegram received, what was stored and what the ledger says: proactive
trims (at turn start and between tool iterations), overflow recovery, the capacity check,
the tool-iteration cap, record-time truncation, imported (legacy) histories, and the
rights a member's turn gives the delete tool.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from adapters.llm.scripted import CallTool, Fail, Reply, ScriptedModel, Step, is_summary_request
from bot.agent.provider_call import FINAL_CALL_NOTE
from bot.app.wiring import App, open_store
from bot.context.compaction import SUMMARY_PREFIX
from bot.context.history_trim import BREADCRUMB_TEXT
from bot.context.tokens import estimate_history_tokens, estimate_message_tokens
from bot.context.tool_schema_cost import estimate_tool_schema_tokens
from bot.domain.ids import SessionKey
from bot.domain.messages import ChatMessage
from bot.domain.records import ToolResultsRecord
from bot.errors import ContextOverflow
from bot.ports import LLMRequest, LLMResponse
from bot.services.legacy_import import import_legacy_rows
from bot.services.usage_report import load_report
from bot.store_ports import ConversationStore
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer
from tests.bot_process import eventually
from tests.deadlines import EVENT, deadline
from tests.fakes import SteppingClock
from tests.polling_rig import polling_app
from tests.rig import rig_settings, wire_app

pytestmark = pytest.mark.slow

CHAT = -1001112223334
OWNER_ID = 42
ALICE = {"id": 1001, "first_name": "Alice"}
BOB = {"id": 1002, "first_name": "Bob"}
CHEN = {"id": 1003, "first_name": "Chen"}
DANA = {"id": 1004, "first_name": "Dana"}
OWNER = {"id": OWNER_ID, "first_name": "Olga"}
T0 = datetime(2026, 11, 30, 6, 0, tzinfo=UTC)
GAP = timedelta(seconds=40)
HEADER = re.compile(r"^\[((?:id|parts):[^\]\n]*)\]")
TURN_CONTEXT = "\n\n[Turn context]\n"
FILLER = "we should check the deploy checklist, the staging logs and the rollback plan again. "


def answer(request: LLMRequest) -> LLMResponse:
    return LLMResponse(text="ok")


@dataclass
class Chat:
    """One group chat with the running bot; `ids[alias]` is the platform id of each alias."""

    api: FakeBotApi
    app: App
    store: ConversationStore
    model: ScriptedModel
    clock: SteppingClock
    data_dir: Path
    llm: FakeOpenAIServer | None = None
    ids: dict[str, int] = field(default_factory=dict)
    step: int = 0
    answers: int = 0

    async def say(
        self,
        user: dict[str, Any],
        text: str,
        *,
        mention: bool = False,
        reply_to: str | None = None,
    ) -> str:
        """Push one message (40 s after the previous); returns its alias. With `mention`,
        waits until the bot's answer (or failure notice) is sent and stored."""
        when = T0 + GAP * self.step
        self.step += 1
        tag = f"@{self.api.username}"
        body = f"{tag} {text}" if mention and tag not in text else text
        update = self.api.user_message(
            CHAT,
            user,
            body,
            date=when,
            reply_to=self.ids[reply_to] if reply_to is not None else None,
        )
        alias = f"m{len(self.ids) + 1}"
        self.ids[alias] = update["message"]["message_id"]
        self.clock.current = when
        self.api.push_update(update)
        if not mention:
            await self.stored(self.ids[alias])
            return alias
        self.answers += 1
        await self.api.wait_for_call("sendMessage", self.answers, timeout=deadline(EVENT))
        await self.app.inbound.drain()
        sent = self.api.sent_messages(CHAT)[-1]
        self.ids[f"m{len(self.ids) + 1}"] = sent["message_id"]
        return alias

    async def ask(self, user: dict[str, Any], text: str, *steps: Step, **kw: Any) -> str:
        """A mention the model answers with `steps` (then its default)."""
        self.model.add(*steps)
        return await self.say(user, text, mention=True, **kw)

    async def stored(self, message_id: int) -> None:
        async def found() -> bool:
            return await self.store.find_platform_message(CHAT, message_id) is not None

        await eventually(found)

    @property
    def requests(self) -> list[LLMRequest]:
        """The chat's turn requests (summary requests left out)."""
        return [r for r in self.model.requests if not is_summary_request(r)]

    def last_text(self) -> str:
        return str(self.api.sent_messages(CHAT)[-1]["text"])

    def ledger(self) -> list[dict[str, Any]]:
        """The ledger lines of the chat's turns (compaction calls left out)."""
        lines: list[dict[str, Any]] = []
        for path in sorted((self.data_dir / "agent-traces").glob("*.jsonl")):
            lines.extend(json.loads(line) for line in path.read_text().splitlines() if line)
        return [line for line in lines if line["purpose"] != "compaction"]

    async def session_id(self) -> int:
        info = await self.store.find_session(SessionKey(chat_id=CHAT, thread_id=0))
        assert info is not None
        return info.id


@asynccontextmanager
async def running(
    tmp_path: Path,
    *,
    over_http: bool = False,
    legacy: Sequence[dict[str, Any]] = (),
    **overrides: Any,
) -> AsyncIterator[Chat]:
    """The bot in a group chat. `legacy` rows are imported (as `tgbot import-legacy` does)
    before the bot starts; `overrides` are settings (`runtime={...}`, `history={...}`)."""
    model = ScriptedModel(default=answer)
    async with FakeBotApi(username="test_bot") as api:
        llm = FakeOpenAIServer(model) if over_http else None
        if llm is not None:
            await llm.start()
            overrides = {"llm_base_url": llm.base_url, "llm_api_key": "sk-test", **overrides}
        overrides.setdefault("history", {"group_tokens": 0})
        settings = rig_settings(
            tmp_path,
            bot_token=api.token,
            telegram_api_base=api.base_url,
            owner_id=OWNER_ID,
            **overrides,
        )
        store = await open_store(settings)
        if legacy:
            report = await import_legacy_rows(
                [json.dumps(row) for row in legacy], sessions=store, history=store
            )
            assert report.errors == ()
        clock = SteppingClock(T0)
        try:
            async with polling_app(
                settings, api, store=store, model=None if over_http else model, clock=clock
            ) as app:
                chat = Chat(
                    api=api,
                    app=app,
                    store=store,
                    model=model,
                    clock=clock,
                    data_dir=tmp_path,
                    llm=llm,
                )
                for row in legacy:
                    for mid in row.get("message_ids") or [row.get("message_id")]:
                        if mid is not None and mid not in chat.ids.values():
                            chat.ids[f"m{len(chat.ids) + 1}"] = mid
                yield chat
        finally:
            if llm is not None:
                await llm.close()


def fixed_tokens(tmp_path: Path) -> int:
    """The fixed part of a request as the app builds it (group system prompt and tool
    schemas): budgets in these tests are this plus what the history may take."""
    from storage.engine import create_engine_for
    from storage.sql import SqlStore
    from tests.fakes import RecordingMessenger

    # a SQL store, as the bot runs on (its tools include memory's); never connected
    app = wire_app(
        rig_settings(tmp_path / "probe"),
        store=SqlStore(create_engine_for(f"sqlite+aiosqlite:///{tmp_path / 'probe.db'}")),
        messenger=RecordingMessenger(),
        model=ScriptedModel(),
    )
    system = ChatMessage(role="system", content=app.runner.system_prompt("group"))
    schemas = [tool.spec.schema() for tool in app.runner.tools.values()]
    return estimate_message_tokens(system) + estimate_tool_schema_tokens(schemas)


def header_fields(message: ChatMessage) -> dict[str, str]:
    match = HEADER.match(message.content)
    assert match is not None, message.content[:80]
    return dict(f.split(":", 1) for f in match.group(1).split(";") if f)


def history_of(request: LLMRequest) -> list[ChatMessage]:
    """The conversation part of a request: after the system prompt and the breadcrumb."""
    return [
        m
        for m in request.messages[1:]
        if not m.is_breadcrumb
        and m.content != BREADCRUMB_TEXT
        and not m.content.startswith(SUMMARY_PREFIX)
    ]


def first_kept(request: LLMRequest) -> ChatMessage:
    """The first conversation message: after the system prompt, breadcrumb and summary."""
    return history_of(request)[0]


def crumbs(request: LLMRequest) -> int:
    return sum(1 for m in request.messages if m.content == BREADCRUMB_TEXT)


def current_message(request: LLMRequest) -> ChatMessage:
    (found,) = [m for m in request.messages if TURN_CONTEXT in m.content]
    return found


def assert_rendered_fresh(request: LLMRequest) -> None:
    """After a runtime trim: one breadcrumb right after the system prompt, and the first
    kept message opens the window (date and time, full sender name)."""
    assert crumbs(request) == 1
    assert request.messages[1].content == BREADCRUMB_TEXT
    first = header_fields(first_kept(request))
    assert "date" in first, first
    assert "time" in first, first
    assert "user" in first, first


async def chatter(chat: Chat, count: int, *, start: int = 0) -> list[str]:
    people = (ALICE, BOB, CHEN)
    return [
        await chat.say(people[(start + n) % 3], f"note {n}: {FILLER * 3}") for n in range(count)
    ]


# ---------------------------------------------------------------- item 1: orphans


def _legacy(role: str, minute: int, **fields: Any) -> dict[str, Any]:
    when = (T0 - timedelta(hours=2) + timedelta(minutes=minute)).isoformat()
    return {"chat_id": CHAT, "scene": "group", "role": role, "time": when, **fields}


async def test_an_imported_tool_result_without_its_call_never_reaches_the_model(
    tmp_path: Path,
) -> None:
    rows = [
        _legacy("user", 0, message_id=501, sender={"id": 1001, "name": "Alice"}, content="hi"),
        _legacy("assistant", 1, message_id=502, content="hello Alice"),
        # the assistant row that made call c9 was deleted from the export
        _legacy("tool", 2, tool_call_id="c9", name="search", content="3 results"),
        _legacy("user", 3, message_id=503, sender={"id": 1002, "name": "Bob"}, content="ok"),
    ]
    async with running(tmp_path, over_http=True, legacy=rows) as chat:
        await chat.ask(CHEN, "what did we find?")
        await chat.ask(ALICE, "and now?")
        assert chat.llm is not None
        for body in chat.llm.requests:
            messages = body["messages"]
            for index, message in enumerate(messages):
                if message["role"] != "tool":
                    continue
                owner = next(m for m in reversed(messages[:index]) if m["role"] != "tool")
                ids = [call["id"] for call in owner.get("tool_calls") or []]
                assert message["tool_call_id"] in ids, messages
        # the imported history is otherwise sent as it was
        contents = [m["content"] for m in chat.llm.requests[0]["messages"]]
        assert any(c.endswith("hello Alice") for c in contents)
        assert [m["text"] for m in chat.api.sent_messages(CHAT)] == ["ok", "ok"]


# ---------------------------------------------------------------- item 2: trims re-render


async def test_a_proactive_trim_at_turn_start_renders_the_kept_turns_again(
    tmp_path: Path,
) -> None:
    fixed = fixed_tokens(tmp_path)
    async with running(tmp_path, runtime={"max_context_tokens": fixed + 500}) as chat:
        notes = await chatter(chat, 14)
        target = notes[0]
        await chat.ask(CHEN, "what did Alice mean back then?", reply_to=target)
        (request,) = chat.requests
        assert_rendered_fresh(request)
        shown = {header_fields(m)["id"] for m in history_of(request)}
        assert target not in shown
        current = current_message(request)
        assert "reply_to:" not in current.content.split("\n", 1)[0]
        assert f"[quote id:{target};user_id:1001;" in current.content
        assert estimate_history_tokens(request.messages) <= fixed + 500
        (line,) = chat.ledger()
        assert [trim["reason"] for trim in line["trims"]] == ["token_budget"]


async def test_a_proactive_trim_between_tool_iterations_renders_again(tmp_path: Path) -> None:
    fixed = fixed_tokens(tmp_path)
    async with running(tmp_path, runtime={"max_context_tokens": fixed + 1800}) as chat:
        long_note = await chat.say(DANA, "the long report: " + FILLER * 40)
        notes = await chatter(chat, 6)
        await chat.ask(
            CHEN,
            "read the long report and sum it up",
            CallTool("inspect_conversation_reference", {"reference": long_note}),
            Reply("done"),
        )
        first, second = chat.requests
        assert_rendered_fresh(second)
        # the long report's turn left (the persisted window binds first, so it may have
        # left already); the second call opens at a later note than the first
        kept = header_fields(first_kept(second))["id"]
        assert kept in notes
        assert notes.index(kept) >= notes.index(header_fields(first_kept(first))["id"])
        # the current turn is whole: its message, the call and the result
        assert second.messages[-2].tool_calls[0].name == "inspect_conversation_reference"
        assert second.messages[-1].role == "tool"
        # re-rendered from the new start, only its header may differ (time shown or not)
        body = current_message(first).content.split("\n", 1)[1]
        assert current_message(second).content.split("\n", 1)[1] == body
        lines = chat.ledger()
        assert len(lines) == 2
        assert any(line["trims"] for line in lines)  # the long report's turn left visibly


# ---------------------------------------------------------------- overflow recovery


async def test_an_overflow_is_recovered_once_with_two_thirds_of_the_history(
    tmp_path: Path,
) -> None:
    async with running(tmp_path, over_http=True) as chat:
        notes = await chatter(chat, 9)
        await chat.ask(
            CHEN,
            "sum up",
            Fail(ContextOverflow("too long")),
            Reply("here it is"),
            reply_to=notes[1],
        )
        first, second = chat.requests
        assert chat.last_text() == "here it is"
        assert crumbs(first) == 0
        assert_rendered_fresh(second)
        # whole turns down to two thirds of the estimate that overflowed; what they held
        # is folded into the summary block, which comes on top
        kept = [m for m in second.messages if not m.content.startswith(SUMMARY_PREFIX)]
        assert estimate_history_tokens(kept) <= estimate_history_tokens(first.messages) * 2 // 3
        shown = {header_fields(m)["id"] for m in history_of(second)}
        assert notes[1] not in shown
        head = current_message(second).content.split("\n", 1)[0]
        assert f"reply_to:{notes[1]}" not in head
        assert f"[quote id:{notes[1]};" in current_message(second).content
        trims = [[trim["reason"] for trim in line["trims"]] for line in chat.ledger()]
        assert trims == [[], ["overflow_recovery"]]


async def test_a_second_overflow_fails_clearly_without_looping(tmp_path: Path) -> None:
    async with running(tmp_path, over_http=True) as chat:
        await chatter(chat, 6)
        await chat.ask(
            CHEN, "sum up", Fail(ContextOverflow("too long")), Fail(ContextOverflow("still"))
        )
        assert len(chat.requests) == 2
        assert chat.last_text().startswith("This conversation no longer fits the model")
        errors = [line["error"] for line in chat.ledger()]
        assert all(e and e.startswith("ContextOverflow") for e in errors)


async def test_an_overflow_with_nothing_to_drop_fails_at_once(tmp_path: Path) -> None:
    async with running(tmp_path, over_http=True) as chat:
        await chat.ask(CHEN, "hello", Fail(ContextOverflow("too long")))
        assert len(chat.requests) == 1
        assert chat.last_text().startswith("This conversation no longer fits the model")


# ---------------------------------------------------------------- capacity check

CJK_REPORT = "报" * 3800


async def test_capacity_with_a_known_window_refuses_before_sending(tmp_path: Path) -> None:
    async with running(tmp_path, llm_context_window=2000) as chat:
        await chat.ask(CHEN, CJK_REPORT)
        assert chat.requests == []
        assert chat.last_text().startswith("This request does not fit the model's context window")
        (line,) = chat.ledger()
        assert "has a 2,000-token context window" in line["error"]


def inspect_many(alias: str, count: int) -> tuple[CallTool, ...]:
    return tuple(
        CallTool("inspect_conversation_reference", {"reference": alias}) for _ in range(count)
    )


async def test_capacity_with_an_unknown_window_assumes_32000(tmp_path: Path) -> None:
    async with running(tmp_path) as chat:
        await chat.ask(CHEN, CJK_REPORT, inspect_many("m1", 8))
        assert len(chat.requests) == 1  # the second call was refused before sending
        assert chat.last_text().startswith("This request does not fit the model's context window")
        error = chat.ledger()[-1]["error"]
        assert "an unknown context window (assumed 32,000 tokens)" in error


async def test_capacity_honours_max_context_tokens_when_the_window_is_unknown(
    tmp_path: Path,
) -> None:
    async with running(tmp_path, runtime={"max_context_tokens": 100_000}) as chat:
        await chat.ask(CHEN, CJK_REPORT, inspect_many("m1", 8), Reply("read them all"))
        assert len(chat.requests) == 2
        assert estimate_history_tokens(chat.requests[1].messages) > 32_000
        assert chat.last_text() == "read them all"


async def test_capacity_names_the_honoured_budget_when_it_refuses(tmp_path: Path) -> None:
    async with running(tmp_path, runtime={"max_context_tokens": 34_000}) as chat:
        await chat.ask(CHEN, CJK_REPORT, inspect_many("m1", 8))
        assert len(chat.requests) == 1
        error = chat.ledger()[-1]["error"]
        assert "runtime.max_context_tokens (34,000 tokens) is used as its window" in error
        assert "32,000" not in error


# ---------------------------------------------------------------- iteration cap


async def test_the_iteration_cap_ends_with_one_summary_call_without_tools(
    tmp_path: Path,
) -> None:
    async with running(tmp_path, runtime={"max_tool_iterations": 2}) as chat:
        await chat.say(ALICE, "the plan is in the wiki")
        await chat.ask(
            CHEN,
            "check m1 twice",
            *inspect_many("m1", 1),
            *inspect_many("m1", 1),
            Reply("the plan is in the wiki"),
        )
        assert len(chat.requests) == 3
        final = chat.requests[2]
        # the same tools, not callable: the prefix stays the cached one
        assert final.tools == chat.requests[1].tools != ()
        assert final.tool_choice == "none"
        assert final.messages[: len(chat.requests[1].messages)] == chat.requests[1].messages
        assert final.messages[-1].content == FINAL_CALL_NOTE
        assert [m.role for m in final.messages[-5:-1]] == ["assistant", "tool"] * 2
        assert chat.last_text() == "the plan is in the wiki"
        lines = chat.ledger()
        assert [line["hit_iteration_cap"] for line in lines] == [False, False, True]
        assert lines[-1]["purpose"] == "final_summary"


# ---------------------------------------------------------------- record-time truncation


async def test_a_long_tool_result_is_truncated_when_recorded(tmp_path: Path) -> None:
    async with running(tmp_path, runtime={"max_tool_result_chars": 600}) as chat:
        long_note = await chat.say(DANA, "report: " + FILLER * 30)
        await chat.ask(
            CHEN,
            "read it",
            CallTool("inspect_conversation_reference", {"reference": long_note}),
            Reply("read"),
        )
        result = chat.requests[1].messages[-1]
        assert result.role == "tool"
        assert re.search(r"\n\n\[\.\.\. \d+ characters truncated \.\.\.\]\n\n", result.content)
        assert len(result.content) < 700
        loaded = await chat.store.load_history(await chat.session_id(), max_records=50)
        (stored,) = [r.body for r in loaded.records if isinstance(r.body, ToolResultsRecord)]
        assert stored.results[0].content == result.content


# ---------------------------------------------------------------- item 3: legacy carriers


async def test_a_legacy_tool_results_carrier_stays_in_its_turn_and_is_shrunk(
    tmp_path: Path,
) -> None:
    carrier = "[Tool results]\nsearch: " + "result line. " * 60
    rows = [
        _legacy("user", 0, message_id=501, sender={"id": 1001, "name": "Alice"}, content="find x"),
        _legacy("assistant", 1, content="searching"),
        _legacy("user", 2, sender={"id": 1001, "name": "Alice"}, content=carrier),
        _legacy("assistant", 3, message_id=502, content="found x"),
    ]
    async with running(tmp_path, legacy=rows) as chat:
        await chat.ask(BOB, "thanks")
        (request,) = chat.requests
        (shown,) = [m for m in request.messages if "Tool results]" in m.content]
        assert shown.content.startswith("[Tool results]")
        assert shown.content.endswith("chars omitted)")
        assert len(shown.content) < 260
        from bot.context.turns import count_turns

        assert count_turns(request.messages) == 2  # Alice's exchange and Bob's message


# ---------------------------------------------------------------- item 4: own text kept


async def test_a_member_text_that_looks_like_a_per_turn_block_is_never_stripped(
    tmp_path: Path,
) -> None:
    text = "[Turn context] is the block name we use in the design doc\n\nright, @test_bot?"
    async with running(tmp_path) as chat:
        alice = await chat.ask(ALICE, text)
        await chat.ask(BOB, "and what do you think?")
        first, second = chat.requests
        mine = current_message(first).content.split(TURN_CONTEXT)[0]
        assert "\\[Turn context] is the block name" in mine
        later = [m.content for m in second.messages if header_fields_or_none(m) == alice]
        assert later == [mine]


def header_fields_or_none(message: ChatMessage) -> str | None:
    match = HEADER.match(message.content)
    return None if match is None else header_fields(message).get("id")


async def test_a_legacy_row_still_loses_its_per_turn_paragraphs(tmp_path: Path) -> None:
    rows = [
        _legacy(
            "user",
            0,
            message_id=501,
            sender={"id": 1001, "name": "Alice"},
            content="[Turn context]\ntime: 2026-10-01 10:00\n\nwhat is the plan?",
        ),
        _legacy("assistant", 1, message_id=502, content="ship on Friday"),
    ]
    async with running(tmp_path, legacy=rows) as chat:
        await chat.ask(BOB, "ok")
        (request,) = chat.requests
        (alice,) = [m for m in request.messages[1:] if "user_id:1001" in m.content]
        assert alice.content.endswith("]\nwhat is the plan?")


# ---------------------------------------------------------------- item 5: every trim


async def test_a_small_runtime_budget_binds_the_persisted_window_not_a_proactive_trim(
    tmp_path: Path,
) -> None:
    """The scene budget (600) is clamped to what the runtime budget leaves, so the window
    move does the work and the ledger line records that one trim (docs/context-window.md)."""
    fixed = fixed_tokens(tmp_path)
    async with running(
        tmp_path,
        history={"group_tokens": 600},
        runtime={"max_context_tokens": fixed + 300},
    ) as chat:
        await chatter(chat, 9)
        await chat.ask(CHEN, "sum up")
        (line,) = chat.ledger()
        (window_move,) = line["trims"]
        assert window_move["reason"] == "token_budget"
        # the budget the move held the window to (clamped, in the units of its tokens),
        # not the scene's 600
        assert window_move["budget"] < 600
        assert window_move["tokens_before"] > window_move["budget"]
        assert window_move["tokens_after"] < window_move["tokens_before"]
        report = load_report(chat.data_dir / "agent-traces", zone=UTC, days=[T0.date()])
        assert report.total.trims == 1


# ---------------------------------------------------------------- item 10: rights


async def test_a_member_cannot_have_another_members_message_deleted(tmp_path: Path) -> None:
    async with running(tmp_path) as chat:
        announcement = await chat.say(ALICE, "the office is closed on Friday")
        await chat.ask(
            BOB,
            f"please delete {announcement}",
            CallTool("delete_message", {"message_id": announcement}),
            Reply("I can't"),
        )
        assert chat.api.calls_of("deleteMessage") == []
        refusal = chat.requests[1].messages[-1]
        assert refusal.role == "tool"
        assert refusal.is_error
        assert "not allowed" in refusal.content
        assert chat.last_text() == "I can't"


async def test_members_delete_their_own_and_the_bots_messages(tmp_path: Path) -> None:
    async with running(tmp_path) as chat:
        own = await chat.say(BOB, "oops, wrong chat")
        await chat.ask(BOB, "hi")  # the bot's answer is the next alias
        bots = f"m{len(chat.ids)}"
        await chat.ask(
            BOB,
            "delete both",
            (
                CallTool("delete_message", {"message_id": own}),
                CallTool("delete_message", {"message_id": bots}),
            ),
            Reply("deleted"),
        )
        deleted = {(c["chat_id"], c["message_id"]) for c in chat.api.calls_of("deleteMessage")}
        assert deleted == {(CHAT, chat.ids[own]), (CHAT, chat.ids[bots])}


async def test_the_owner_and_chat_admins_may_delete_anyones_message(tmp_path: Path) -> None:
    async with running(tmp_path) as chat:
        chat.api.set_admins(CHAT, {DANA["id"]})
        first = await chat.say(ALICE, "spam one")
        second = await chat.say(ALICE, "spam two")
        third = await chat.say(ALICE, "spam three")
        await chat.ask(
            DANA, "remove", CallTool("delete_message", {"message_id": first}), Reply("gone")
        )
        await chat.ask(
            DANA, "and this", CallTool("delete_message", {"message_id": second}), Reply("gone")
        )
        await chat.ask(
            OWNER, "this too", CallTool("delete_message", {"message_id": third}), Reply("gone")
        )
        deleted = [c["message_id"] for c in chat.api.calls_of("deleteMessage")]
        results = [r.messages[-1].content for r in chat.requests if r.messages[-1].role == "tool"]
        assert deleted == [chat.ids[first], chat.ids[second], chat.ids[third]], results
        # Dana's rights were asked once (cached), the owner's never
        asked = [c["user_id"] for c in chat.api.calls_of("getChatMember")]
        assert asked == [DANA["id"]]

"""ScriptedModel: script steps, default responders, simulated usage and prefix cache."""

from __future__ import annotations

import inspect
import json

import pytest

from adapters.llm.scripted import (
    CACHE_BLOCK_TOKENS,
    CallTool,
    Fail,
    Reply,
    ScriptedModel,
    Step,
    demo_responder,
    user_body,
)
from bot.context.tokens import estimate_history_tokens, estimate_text_tokens
from bot.domain.messages import ChatMessage, ToolCall
from bot.errors import ContextOverflow
from bot.ports import LLMProvider, LLMRequest, LLMResponse, ToolSpec, Usage


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


def request(*messages: ChatMessage, tools: tuple[ToolSpec, ...] = ()) -> LLMRequest:
    return LLMRequest(model="m", messages=messages, tools=tools)


def usage_of(response: LLMResponse) -> Usage:
    assert response.usage is not None
    return response.usage


def tool(name: str) -> ToolSpec:
    return ToolSpec(name=name, description=f"{name} tool", parameters={"type": "object"})


DEMO_TOOLS = (tool("delete_message"), tool("set_reaction"), tool("search_notes"))


async def test_is_an_llm_provider() -> None:
    """Used only through the port, as the app uses a real provider: `complete` takes the
    request and a keyword-only `on_text`, and answers an `LLMResponse` with usage."""
    model: LLMProvider = ScriptedModel([Reply("hello")])
    port = inspect.signature(LLMProvider.complete).parameters
    ours = inspect.signature(ScriptedModel.complete).parameters
    assert [(p.name, p.kind) for p in ours.values()] == [(p.name, p.kind) for p in port.values()]
    streamed: list[str] = []

    async def sink(text: str) -> None:
        streamed.append(text)

    response = await model.complete(request(user("hi")), on_text=sink)

    assert isinstance(response, LLMResponse)
    assert response.text == "hello"
    assert usage_of(response).input_tokens > 0
    assert streamed in ([], ["hello"])  # a provider that cannot stream ignores the sink


async def test_plays_the_script_in_order_and_records_requests() -> None:
    model = ScriptedModel(
        [
            CallTool("search_notes", {"query": "x"}),
            (CallTool("a", {"n": 1}), CallTool("b", id="mine"), Reply("looking")),
            lambda req: LLMResponse(text=f"{len(req.messages)} messages"),
            Reply("done"),
        ]
    )
    first = await model.complete(request(user("q")))
    second = await model.complete(request(user("q"), user("r")))
    third = await model.complete(request(user("q"), user("r"), user("s")))
    fourth = await model.complete(request(user("q")))
    assert first.tool_calls == (
        ToolCall(id="call_1", name="search_notes", arguments='{"query":"x"}'),
    )
    assert first.finish_reason == "tool_calls"
    assert second.text == "looking"
    assert second.tool_calls == (
        ToolCall(id="call_2", name="a", arguments='{"n":1}'),
        ToolCall(id="mine", name="b", arguments="{}"),
    )
    assert third.text == "3 messages"
    assert (fourth.text, fourth.finish_reason, fourth.model) == ("done", "stop", "scripted")
    assert [len(r.messages) for r in model.requests] == [1, 2, 3, 1]
    assert model.remaining == 0


async def test_fail_raises_and_is_still_recorded() -> None:
    model = ScriptedModel([Fail(ContextOverflow("too long")), Reply("ok")])
    with pytest.raises(ContextOverflow):
        await model.complete(request(user("a")))
    assert (await model.complete(request(user("a")))).text == "ok"
    assert len(model.requests) == 2


async def test_default_echoes_the_last_user_body_without_header_or_turn_context() -> None:
    content = (
        "[id:m31;user_id:1001;time:14:03;]\nwhat did we decide about the meeting on friday, "
        "and who is bringing the slides?\n\n[Turn context]\ntime: 2026-11-29 14:03\n"
    )
    model = ScriptedModel()
    response = await model.complete(request(user("older"), user(content)))
    body = "what did we decide about the meeting on friday, and who is bringing the slides?"
    assert response.text == "Noted: " + body[:60]
    assert response.text.endswith("who is b")
    assert (await model.complete(request())).text == "Noted."


@pytest.mark.parametrize(
    ("content", "body"),
    [
        ("plain text", "plain text"),
        ("[id:m1;user:Ann;user_id:1;date:2026-11-29;time:09:00;]\nhello", "hello"),
        ("[id:m2;]\n[quote id:m1;user_id:1;time:09:00;] hello\nyes!", "yes!"),
        ("[id:m3;]\nbody\n\n[Turn context]\nmodel: x", "body"),
        ("[not a header]\nkeep", "[not a header] keep"),
    ],
    ids=["no-header", "full-header", "quote-line", "turn-context", "bracket-text"],
)
def test_user_body(content: str, body: str) -> None:
    assert user_body(content) == body


async def test_answers_are_deterministic() -> None:
    script: list[Step] = [CallTool("f", {"b": 2, "a": 1}), Reply("x")]
    conversation = request(user("[id:m1;]\nhello"), tools=DEMO_TOOLS)
    runs = []
    for _ in range(2):
        model = ScriptedModel(list(script))
        runs.append([await model.complete(conversation) for _ in range(3)])
    assert runs[0] == runs[1]


async def test_usage_estimates_the_request_and_the_reply() -> None:
    messages = (user("a" * 400), user("b" * 40))
    response = await ScriptedModel([Reply("c" * 80)]).complete(request(*messages))
    assert response.usage is not None
    assert response.usage.input_tokens == estimate_history_tokens(messages)
    assert response.usage.output_tokens == estimate_text_tokens("c" * 80) + 4
    assert response.usage.cached_tokens == 0


async def test_tool_schemas_count_as_input() -> None:
    model = ScriptedModel()
    with_tools = await model.complete(request(user("a"), tools=DEMO_TOOLS))
    without = await model.complete(request(user("a")))
    assert usage_of(with_tools).input_tokens > usage_of(without).input_tokens


async def test_cached_tokens_are_the_shared_prefix_in_whole_blocks() -> None:
    model = ScriptedModel()
    history = tuple(user(f"{i}" * 200) for i in range(6))  # 54 tokens each
    first = await model.complete(request(*history[:4]))
    second = await model.complete(request(*history[:5]))
    third = await model.complete(request(history[0], user("edited"), *history[2:5]))
    unrelated = await model.complete(request(user("x" * 800)))
    assert usage_of(first).cached_tokens == 0
    shared = estimate_history_tokens(history[:4])  # 216 → 192 in 64-token blocks
    assert usage_of(second).cached_tokens == shared // CACHE_BLOCK_TOKENS * CACHE_BLOCK_TOKENS
    assert usage_of(second).cached_tokens == 192
    assert usage_of(third).cached_tokens == 0  # 54 tokens shared: less than one block
    assert usage_of(unrelated).cached_tokens == 0


async def test_cache_matches_any_earlier_request_not_only_the_last() -> None:
    model = ScriptedModel()
    long = tuple(user(f"{i}" * 400) for i in range(3))
    await model.complete(request(*long))
    await model.complete(request(user("something else")))
    again = await model.complete(request(*long, user("next")))
    assert again.usage is not None
    assert again.usage.cached_tokens == estimate_history_tokens(long) // 64 * 64


async def test_a_change_in_tools_breaks_the_cache() -> None:
    model = ScriptedModel()
    history = tuple(user("z" * 1000) for _ in range(2))
    await model.complete(request(*history, tools=DEMO_TOOLS))
    same = await model.complete(request(*history, tools=DEMO_TOOLS))
    other = await model.complete(request(*history, tools=DEMO_TOOLS[:1]))
    assert usage_of(same).cached_tokens > 0
    assert usage_of(other).cached_tokens == 0


async def test_failed_requests_do_not_warm_the_cache() -> None:
    model = ScriptedModel([Fail(ContextOverflow("x"))])
    history = (user("q" * 1000),)
    with pytest.raises(ContextOverflow):
        await model.complete(request(*history))
    response = await model.complete(request(*history))
    assert response.usage is not None
    assert response.usage.cached_tokens == 0


@pytest.mark.parametrize(
    ("text", "name", "arguments"),
    [
        ("please delete m12", "delete_message", {"message_id": "m12"}),
        ("删除 m7.2", "delete_message", {"message_id": "m7.2"}),
        ("react m3 👍", "set_reaction", {"message_id": "m3", "emoji": "👍"}),
        ("can you look up the budget", "search_notes", {"query": "the budget"}),
        ("search", "search_notes", {"query": "search"}),
    ],
    ids=["delete", "delete-zh-part", "react", "look-up", "bare-search"],
)
def test_demo_calls_the_tool_the_user_asks_for(
    text: str, name: str, arguments: dict[str, str]
) -> None:
    response = demo_responder(request(user(f"[id:m20;user_id:1;]\n{text}"), tools=DEMO_TOOLS))
    (call,) = response.tool_calls
    assert (call.name, json.loads(call.arguments)) == (name, arguments)
    assert call.id == "call_1_1"


def test_demo_calls_only_offered_tools() -> None:
    response = demo_responder(request(user("delete m3"), tools=(tool("set_reaction"),)))
    assert response == LLMResponse(text="Noted: delete m3")


def test_demo_answers_after_the_tool_results() -> None:
    call = ToolCall(id="c1", name="delete_message", arguments='{"message_id":"m3"}')
    messages = (
        user("delete m3 and react m4 🎉"),
        ChatMessage(role="assistant", tool_calls=(call,)),
        ChatMessage(role="tool", tool_call_id="c1", name="delete_message", content="deleted"),
        ChatMessage(
            role="tool", tool_call_id="c2", name="set_reaction", content="gone", is_error=True
        ),
    )
    response = demo_responder(request(*messages, tools=DEMO_TOOLS))
    assert response.tool_calls == ()
    assert response.text == "Done. delete_message ok: deleted; set_reaction failed: gone"


async def test_demo_model_runs_a_whole_tool_turn() -> None:
    model = ScriptedModel.demo()
    turn = [user("[id:m5;]\ndelete m2 then react m4 ❤️")]
    first = await model.complete(request(*turn, tools=DEMO_TOOLS))
    assert [c.name for c in first.tool_calls] == ["delete_message", "set_reaction"]
    turn.append(ChatMessage(role="assistant", tool_calls=first.tool_calls))
    turn += [
        ChatMessage(role="tool", tool_call_id=c.id, name=c.name, content="ok")
        for c in first.tool_calls
    ]
    second = await model.complete(request(*turn, tools=DEMO_TOOLS))
    assert second.text.startswith("Done.")
    assert second.model == "offline-demo"
    assert second.usage is not None
    # tool schemas + the user message were sent before: cached in whole 64-token blocks
    assert 0 < second.usage.cached_tokens < second.usage.input_tokens
    assert second.usage.cached_tokens % CACHE_BLOCK_TOKENS == 0


async def test_a_load_model_keeps_no_requests_but_still_simulates_the_cache() -> None:
    model = ScriptedModel(keep_requests=False)
    first = await model.complete(request(user("x" * 400)))
    second = await model.complete(request(user("x" * 400), user("again")))
    assert model.requests == []
    assert usage_of(first).cached_tokens == 0
    assert usage_of(second).cached_tokens == CACHE_BLOCK_TOKENS

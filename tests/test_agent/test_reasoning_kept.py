"""A model's reasoning is kept with the assistant messages it came with and goes back to the
provider, but no member ever reads it: not in the chat, not in the text of any message the
model is sent (`[Turn context]`, quotes, history), not in search, not in a summary."""

from __future__ import annotations

from pathlib import Path

from adapters.llm.scripted import Reply, ScriptedModel
from bot.context.compaction import extractive_summary, summary_request
from bot.domain.facts import Quote
from bot.domain.messages import Reasoning, ToolCall
from bot.domain.records import AssistantRecord
from bot.ports import LLMRequest, LLMResponse
from tests.fakes import RecordingMessenger
from tests.rig import BOT_ID
from tests.test_agent.rig import CHAT, make_app, say

SECRET = "zebracorn"
"""A word only the reasoning holds."""


def thinking(text: str) -> Reasoning:
    return Reasoning(format="reasoning_content", text=f"I ponder the {SECRET} {text}.")


def call_tool(_: LLMRequest) -> LLMResponse:
    call = ToolCall(
        id="call_a", name="inspect_conversation_reference", arguments='{"reference": "m1"}'
    )
    return LLMResponse(tool_calls=(call,), reasoning=thinking("tool"))


def answer(_: LLMRequest) -> LLMResponse:
    return LLMResponse(text="Here is what I found.", reasoning=thinking("answer"))


async def test_reasoning_is_kept_for_the_provider_and_shown_to_nobody(tmp_path: Path) -> None:
    model = ScriptedModel([call_tool, answer, Reply("All right.")])
    messenger = RecordingMessenger()
    app, store, clock = make_app(tmp_path, model, messenger)
    await say(app, clock, 1, "@Helper look at m1", mentions_bot=True)
    reply = messenger.sent[-1]
    quote = Quote(id=reply.message_id, sender_id=BOT_ID, summary=reply.text)
    await say(app, clock, 3, f"@Helper search {SECRET}", mentions_bot=True, quote=quote)

    # the chat never saw it
    assert all(SECRET not in sent.text for sent in messenger.sent)
    # stored with the tool call and with the reply, as the provider gave it
    (session,) = await store.list_sessions()
    path = await store.load_path(session.id)
    kept = [r.body.reasoning for r in path if isinstance(r.body, AssistantRecord)]
    assert kept[:2] == [thinking("tool"), thinking("answer")]
    # the next request carries it beside the text, never inside it
    later = model.requests[-1].messages
    assert [m.reasoning for m in later if m.role == "assistant"][:2] == kept[:2]
    for message in later:
        if message.role == "user" and message is not later[-1]:
            assert SECRET not in message.content
        if message.role != "user":
            assert SECRET not in message.content
    current = later[-1].content  # the member's own word, and the turn's blocks
    assert current.count(SECRET) == 1
    assert "[Turn context]" in current or "Turn context" in current
    # search finds the member's message, never the reasoning
    found = await store.search_messages(CHAT, 0, SECRET, limit=10)
    assert [m.sender_id for m in found] == [1001]
    # a summary of this window has the words people said, not the model's thoughts
    folded = summary_request(later[:-1], first="m1", last="m3", max_tokens=200)
    assert SECRET not in extractive_summary(folded)

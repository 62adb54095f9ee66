"""Message builders and a hypothesis strategy of realistic histories, shared by the trim tests.

Every builder's default text is "hello world!": ceil(12 / 4) + 4 = 7 tokens a message.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from hypothesis import strategies as st

from bot.context.history_trim import BREADCRUMB_TEXT, breadcrumb_message
from bot.context.turns import TOOL_RESULTS_PREFIX
from bot.domain.messages import ChatMessage, ToolCall

HELLO = "hello world!"  # 7 tokens as a message


def system(text: str = HELLO) -> ChatMessage:
    return ChatMessage(role="system", content=text)


def user(text: str = HELLO, *, merged: bool = False, tokens: int | None = None) -> ChatMessage:
    return ChatMessage(role="user", content=text, continues_turn=merged, tokens=tokens)


def crumb(text: str = HELLO) -> ChatMessage:
    """A flagged breadcrumb with a 7-token text, so tables keep round numbers."""
    return ChatMessage(role="user", content=text, is_breadcrumb=True)


def assistant(text: str = HELLO, *calls: str, tokens: int | None = None) -> ChatMessage:
    """An assistant message; each call id in `calls` becomes a call `f({})` (2 tokens)."""
    return ChatMessage(
        role="assistant",
        content=text,
        tool_calls=tuple(ToolCall(id=c, name="f", arguments="{}") for c in calls),
        tokens=tokens,
    )


def three_turns() -> list[ChatMessage]:
    """A system prompt and three turns, 7 tokens a message ("u1 ........", the first user
    text, is 12 characters too): 49 tokens."""
    return [system(), user("u1 ........"), assistant(), user(), assistant(), user(), assistant()]


def tool(call_id: str, text: str = HELLO, *, is_error: bool = False) -> ChatMessage:
    return ChatMessage(role="tool", content=text, tool_call_id=call_id, name="f", is_error=is_error)


def prompt_results(text: str = "ok") -> ChatMessage:
    return ChatMessage(role="user", content=f"{TOOL_RESULTS_PREFIX} {text}")


# ---------------------------------------------------------------- hypothesis

_texts = st.sampled_from(["", "ok", HELLO, "你好世界", "x" * 90, "[IMAGE:/tmp/a.png] seen"])
_cached = st.one_of(st.none(), st.integers(min_value=0, max_value=60))


def _ids() -> Iterator[str]:
    n = 0
    while True:
        n += 1
        yield f"call_{n}"


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[ChatMessage], bool]:
    """(messages, crumb_present): system rows, an optional breadcrumb and orphan prefix,
    then turns with parallel tool calls, prompt-mode results, merged user messages, system
    rows between steps and a real user message that reads like the breadcrumb. Each message
    has a cached estimate or none. Tool calls are always answered right after their call."""
    ids = _ids()
    out: list[ChatMessage] = []

    def add(message: ChatMessage) -> None:
        out.append(replace(message, tokens=draw(_cached)))

    for _ in range(draw(st.integers(0, 2))):
        add(system(draw(_texts)))
    crumb_present = draw(st.booleans())
    if crumb_present:
        add(breadcrumb_message())
    if draw(st.booleans()):  # orphan prefix: the tail of an exchange trimmed long ago
        add(assistant(draw(_texts)))
    for _ in range(draw(st.integers(0, 7))):
        opener = draw(st.sampled_from(["plain", "plain", "reads_like_crumb"]))
        add(user(BREADCRUMB_TEXT if opener == "reads_like_crumb" else draw(_texts)))
        for _ in range(draw(st.integers(0, 2))):
            add(user(draw(_texts), merged=True))
        for step in draw(st.lists(st.sampled_from(["calls", "prompt", "text", "system"]))):
            if step == "calls":
                calls = [next(ids) for _ in range(draw(st.integers(1, 3)))]
                add(assistant(draw(_texts), *calls))
                for call_id in draw(st.permutations(calls)):
                    add(tool(call_id, draw(_texts)))
            elif step == "prompt":
                add(assistant(draw(_texts)))
                add(prompt_results(draw(_texts)))
            elif step == "text":
                add(assistant(draw(_texts)))
            else:
                add(system(draw(_texts)))
    return out, crumb_present

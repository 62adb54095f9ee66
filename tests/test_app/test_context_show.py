"""`tgbot context show --chat ID`: exactly the next request, with the token split, no secret."""

from __future__ import annotations

import re

import pytest

from bot.context.tokens import estimate_message_tokens
from bot.domain.messages import ChatMessage
from tests.test_app.conftest import (
    CHAT,
    SECRET_KEY,
    SECRET_TOKEN,
    Traffic,
    cli_env,
    tgbot,
    tgbot_here,
)

SPLIT = re.compile(
    r"tokens: fixed (\d+) \(system \+ tool schemas\), history (\d+), current (\d+), total (\d+)"
)
CLOCK_LINE = re.compile(r"^time: .*$", re.MULTILINE)


def preview_of(messages: tuple[ChatMessage, ...]) -> list[str]:
    lines: list[str] = []
    for index, message in enumerate(messages):
        lines.append(f"--- [{index}] {message.role} ({estimate_message_tokens(message)} tokens)")
        if message.content:
            lines.append(message.content)
        lines.extend(f"tool_call {c.id}: {c.name}({c.arguments})" for c in message.tool_calls)
    return lines


@pytest.mark.slow  # `tgbot context show`'s one real-process test
async def test_it_prints_what_the_model_is_sent_next(traffic: Traffic) -> None:
    done = await tgbot("context", "show", "--chat", str(CHAT), env=cli_env(traffic.data_dir))
    assert done.code == 0, done.err

    # The bot answers the newest (unanswered) message now: that request is the one shown.
    session = await traffic.session()
    await traffic.app.runner.run_turn(session, reply_to=13)
    sent = traffic.model.requests[-1]
    *shown, rule, split = done.out.rstrip("\n").split("\n")
    assert rule == "---"
    # the per-turn clock line is the only thing that may differ (now vs. the test's clock)
    assert CLOCK_LINE.sub("time: …", "\n".join(shown)) == CLOCK_LINE.sub(
        "time: …", "\n".join(preview_of(sent.messages))
    )
    assert sent.messages[-1].content.startswith("[id:m")
    assert "one more thing, unanswered\n\n[Turn context]\n" in sent.messages[-1].content
    assert "[Turn context]" not in "\n".join(m.content for m in sent.messages[1:-1])

    match = SPLIT.fullmatch(split)
    assert match is not None, split
    fixed, history, current, total = (int(g) for g in match.groups())
    assert history == sum(estimate_message_tokens(m) for m in sent.messages[1:-1])
    assert current == estimate_message_tokens(sent.messages[-1])
    assert fixed > estimate_message_tokens(sent.messages[0])  # the tool schemas count too
    assert total == fixed + history + current
    assert history > 0

    for secret in (SECRET_TOKEN, SECRET_KEY, "SECRET"):
        assert secret not in done.out
        assert secret not in done.err


async def test_an_unknown_chat_is_one_clear_line(traffic: Traffic) -> None:
    done = await tgbot_here("context", "show", "--chat", "-1", env=cli_env(traffic.data_dir))
    assert done.code != 0
    # what it reads, then the one line of the failure
    reading, failure = done.err.strip().splitlines()
    assert reading.startswith(f"tgbot: reading DATA_DIR={traffic.data_dir} ")
    assert "no conversation stored for chat -1" in failure
    assert "Traceback" not in done.err

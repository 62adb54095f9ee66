"""A model fake shared by the scale-out tests: it notices two turns of one chat at once."""

from __future__ import annotations

import asyncio
import re
from collections import Counter

from bot.ports import LLMRequest, LLMResponse, TextSink

TAG = re.compile(r"\bc(-?\d+)-m(\d+)\b")


def tag(chat: int, n: int) -> str:
    """The text of message `n` in `chat`, which the probe reads back from the request."""
    return f"c{chat}-m{n}"


class OverlapProbe:
    """An LLMProvider answering `re <tag>`; counts turns of one chat that ran at once.

    Every worker's model calls reach the same probe (in process, or through a
    FakeOpenAIServer), so an overlap between workers shows up in `overlaps`.
    """

    def __init__(self, *, think: float = 0.003) -> None:
        self.think = think
        self.inside: Counter[int] = Counter()
        self.overlaps = 0
        self.calls = 0

    async def complete(
        self, request: LLMRequest, *, on_text: TextSink | None = None
    ) -> LLMResponse:
        user = next(m.content for m in reversed(request.messages) if m.role == "user")
        found = TAG.search(user)
        assert found is not None, user
        chat = int(found[1])
        self.calls += 1
        self.inside[chat] += 1
        self.overlaps += self.inside[chat] > 1
        try:
            await asyncio.sleep(self.think)  # the model "thinks"; another worker may step in
            return LLMResponse(text=f"re {found[0]}")
        finally:
            self.inside[chat] -= 1

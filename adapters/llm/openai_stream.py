"""OpenAI chat-completions SSE chunks folded into the `LLMResponse` `from_response` would give.

No I/O, like `openai_wire`, whose readers it shares; the provider feeds it chunk by chunk
when a reply streams (a draft shown while the model writes).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from adapters.llm.openai_wire import (
    JSON,
    MESSAGE_SIGNATURE,
    REASONING_FIELDS,
    SAYS_WHY_EMPTY,
    content_text,
    reasoning_from_wire,
    stop_of,
    thought_signature,
    tool_call_from_wire,
    usage_from_wire,
)
from adapters.llm.provider_errors import error_in_body
from bot.errors import ProviderBadResponse
from bot.ports import LLMResponse, Usage


class StreamState:
    """Folds chat-completions SSE chunks into the response `from_response` would give: text
    deltas, tool-call deltas (by `index`), the finish reason and the final usage chunk."""

    def __init__(self) -> None:
        self.text = ""
        self.refusal = ""
        self.usage: Usage | None = None
        self.finish_reason: str | None = None
        self.model: str | None = None
        self._calls: dict[int, JSON] = {}
        self._reasoning: dict[str, str] = {}
        """Reasoning text by field name, folded from the deltas."""
        self._signature: str | None = None
        """Gemini's signature on the message itself (a text-only reply)."""
        self._details: dict[int, JSON] = {}
        """OpenRouter's `reasoning_details` by index, folded from the deltas."""

    def feed(self, chunk: Mapping[str, Any]) -> bool:
        """Take one chunk; True when the text grew. A chunk carrying an error raises it."""
        if chunk.get("error"):
            raise error_in_body(chunk)
        if isinstance(chunk.get("model"), str):
            self.model = chunk["model"]
        if chunk.get("usage") is not None:
            self.usage = usage_from_wire(chunk["usage"])
        grew = False
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
                continue
            if isinstance(choice.get("finish_reason"), str):
                self.finish_reason = choice["finish_reason"]
            delta = choice.get("delta")
            if isinstance(delta, Mapping) and self._delta(delta):
                grew = True
        return grew

    def _delta(self, delta: Mapping[str, Any]) -> bool:
        """One choice's delta: text (True when it grew), reasoning, refusal, tool calls."""
        piece = content_text(delta.get("content"))
        if piece:
            self.text += piece
        for key in REASONING_FIELDS:
            thought = delta.get(key)
            if isinstance(thought, str) and thought:
                self._reasoning[key] = self._reasoning.get(key, "") + thought
        if (own := thought_signature(delta)) is not None:
            self._signature = own
        for detail in delta.get("reasoning_details") or []:
            if isinstance(detail, Mapping):
                self._detail_delta(detail)
        if isinstance(delta.get("refusal"), str):
            self.refusal += delta["refusal"]
        for raw in delta.get("tool_calls") or []:
            if not isinstance(raw, Mapping):
                raise ProviderBadResponse("a tool-call delta is not an object")
            self._tool_call_delta(raw)
        return bool(piece)

    def _detail_delta(self, raw: Mapping[str, Any]) -> None:
        """One piece of a reasoning detail: its strings (`text`, `summary`, `data`) grow
        piece by piece, its other fields (`type`, `format`, `signature`, `id`) are set."""
        index = raw.get("index", len(self._details))
        detail = self._details.setdefault(index if isinstance(index, int) else 0, {})
        for key, value in raw.items():
            if key in ("text", "summary", "data") and isinstance(value, str):
                detail[key] = detail.get(key, "") + value
            elif value is not None:
                detail[key] = value

    def _tool_call_delta(self, raw: Mapping[str, Any]) -> None:
        index = raw.get("index", len(self._calls))
        call = self._calls.setdefault(
            index if isinstance(index, int) else 0,
            {"id": None, "function": {"name": "", "arguments": ""}},
        )
        if isinstance(raw.get("id"), str):
            call["id"] = raw["id"]
        if thought_signature(raw) is not None:
            call["extra_content"] = raw["extra_content"]
        function = raw.get("function")
        if not isinstance(function, Mapping):
            return
        if isinstance(function.get("name"), str):
            call["function"]["name"] += function["name"]
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            call["function"]["arguments"] += arguments
        elif isinstance(arguments, Mapping):
            # Ollama sends each call whole, its arguments as an object
            call["function"]["arguments"] = json.dumps(arguments, ensure_ascii=False)

    def result(self) -> LLMResponse:
        calls = tuple(
            tool_call_from_wire(self._calls[index], position)
            for position, index in enumerate(sorted(self._calls))
        )
        stop = stop_of(self.finish_reason, refusal=self.refusal, calls=bool(calls))
        if not self.text and not calls and stop not in SAYS_WHY_EMPTY:
            raise ProviderBadResponse("empty reply")
        signatures = {
            call.id: signature
            for call, index in zip(calls, sorted(self._calls), strict=True)
            if (signature := thought_signature(self._calls[index])) is not None
        }
        if self._signature is not None:
            signatures[MESSAGE_SIGNATURE] = self._signature
        return LLMResponse(
            text=self.text,
            tool_calls=calls,
            usage=self.usage,
            finish_reason=self.finish_reason,
            model=self.model,
            reasoning=reasoning_from_wire(
                {
                    **self._reasoning,
                    "reasoning_details": [d for _, d in sorted(self._details.items())],
                },
                signatures,
            ),
            stop=stop,
            refusal=self.refusal,
        )


class OpenAIStream:
    """A `StreamState` read as the provider reads any stream: events by name and data (the
    chat-completions stream names none)."""

    def __init__(self) -> None:
        self._state = StreamState()

    @property
    def text(self) -> str:
        return self._state.text

    def feed(self, event: str, data: Mapping[str, Any]) -> bool:
        return self._state.feed(data)

    def result(self) -> LLMResponse:
        return self._state.result()


__all__ = ("OpenAIStream", "StreamState")

"""Reasoning models for the fake servers: each thinks on every answer and refuses a request
that does not give its reasoning back the way its provider's documentation requires, with
the provider's own 400 (bodies kept in tests/fixtures/llm/*/reasoning_*.json with their
sources).

- `DeepSeekThinking` (chat completions): `reasoning_content` on every answer; "between two
  user messages, if the model performed a tool call", every assistant message must carry
  it back, and a tool call's reasoning unchanged.
- `DeepSeekAnthropicThinking` (DeepSeek's Anthropic-format endpoint): the same rule over
  `thinking` blocks (a user message of only tool results is no boundary there).
- `ClaudeThinking`: with `thinking` enabled or adaptive, a signed `thinking` block (and a
  `redacted_thinking` one every third answer); every block sent back must carry its own
  signature, the last assistant message of a tool loop must start with one, and
  `temperature` other than 1 is refused.
- `OllamaThinking`: its OpenAI-compatible endpoint's `reasoning` on every answer; sending
  it back is optional (the model's chat template decides), so nothing is refused.
- `GeminiThinking` (the OpenAI endpoint): a thought signature on the first tool call of
  every answer (as Gemini 3 gives them for parallel calls); every tool call of the current
  turn that had one must carry it back unchanged.

Each keeps what it refused in `refused`, so a test can say "0 provider 400s".
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

JSON = dict[str, Any]

DEEPSEEK_MISSING = "The `reasoning_content` in the thinking mode must be passed back to the API."
DEEPSEEK_ANTHROPIC_MISSING = (
    "The content[].thinking in the thinking mode must be passed back to the API."
)
CLAUDE_NOT_FIRST = (
    "messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
    "`{found}`. When `thinking` is enabled, a final `assistant` message must start with a "
    "thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We "
    "recommend you include thinking blocks from previous turns. To avoid this requirement, "
    "disable `thinking`. Please consult our documentation at "
    "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
)
CLAUDE_BAD_SIGNATURE = "messages.{index}.content.{block}: Invalid `signature` in `thinking` block"
CLAUDE_TEMPERATURE = (
    "`temperature` may only be set to 1 when thinking is enabled or in adaptive mode."
)
GEMINI_MISSING = (
    "Function call is missing a thought_signature in functionCall parts. This is required "
    "for tools to work correctly, and missing thought_signature may lead to degraded model "
    "performance. Additional data, function call `default_api:{name}` , position {position}. "
    "please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more "
    "details."
)


class Refusal(Exception):
    """A request the provider answers with this status and body."""

    def __init__(self, status: int, body: object) -> None:
        super().__init__(str(body))
        self.status = status
        self.body = body


class ThinkingModel(Protocol):
    """What a fake server asks of its reasoning model."""

    refused: list[object]

    def check(self, body: Mapping[str, Any]) -> None:
        """Raise `Refusal` when the request breaks the provider's rule."""

    def think(self, answer: JSON, body: Mapping[str, Any]) -> None:
        """Add this answer's reasoning to the response body."""


def _openai_error(message: str) -> JSON:
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_request_error",
        }
    }


def _anthropic_error(message: str) -> JSON:
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


def _turns(messages: Sequence[Any], is_boundary: Any) -> list[list[tuple[int, JSON]]]:
    """The assistant messages between boundaries, with their indexes."""
    turns: list[list[tuple[int, JSON]]] = [[]]
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        if is_boundary(message):
            turns.append([])
        elif message.get("role") == "assistant":
            turns[-1].append((index, message))
    return turns


@dataclass
class _DeepSeekBook:
    """What both DeepSeek endpoints keep: what they refused, the reasoning of each tool-call
    answer by its call ids, and a counter; they think unless the request turns it off."""

    refused: list[object] = field(default_factory=list)
    issued: dict[tuple[str, ...], str] = field(default_factory=dict)
    _numbers: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def _thinking(self, body: Mapping[str, Any]) -> bool:
        toggle = body.get("thinking")
        return not (isinstance(toggle, dict) and toggle.get("type") == "disabled")


@dataclass
class DeepSeekThinking(_DeepSeekBook):
    def check(self, body: Mapping[str, Any]) -> None:
        if not self._thinking(body):
            return
        messages = body.get("messages") or []
        for turn in _turns(messages, lambda m: m.get("role") == "user"):
            if not any(message.get("tool_calls") for _, message in turn):
                continue
            for _, message in turn:
                sent = message.get("reasoning_content")
                ids = tuple(call.get("id", "") for call in message.get("tool_calls") or [])
                wanted = self.issued.get(ids) if ids else None
                if not isinstance(sent, str) or (wanted is not None and sent != wanted):
                    self.refused.append(body)
                    raise Refusal(400, _openai_error(DEEPSEEK_MISSING))

    def think(self, answer: JSON, body: Mapping[str, Any]) -> None:
        if not self._thinking(body):
            return
        message = answer["choices"][0]["message"]
        text = f"Let me think (#{next(self._numbers)}) about what the member asked."
        message["reasoning_content"] = text
        ids = tuple(call["id"] for call in message.get("tool_calls") or [])
        if ids:
            self.issued[ids] = text


def _anthropic_thinking_on(body: Mapping[str, Any]) -> bool:
    toggle = body.get("thinking")
    return isinstance(toggle, dict) and toggle.get("type") in ("enabled", "adaptive")


def _blocks(message: Mapping[str, Any]) -> list[Any]:
    content = message.get("content")
    return content if isinstance(content, list) else []


def _only_tool_results(message: Mapping[str, Any]) -> bool:
    blocks = _blocks(message)
    return bool(blocks) and all(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks
    )


@dataclass
class DeepSeekAnthropicThinking(_DeepSeekBook):
    def check(self, body: Mapping[str, Any]) -> None:
        if not self._thinking(body):
            return
        messages = body.get("messages") or []

        def boundary(message: Mapping[str, Any]) -> bool:
            return message.get("role") == "user" and not _only_tool_results(message)

        for turn in _turns(messages, boundary):
            if not any(_tool_ids(message) for _, message in turn):
                continue
            for _, message in turn:
                blocks = _blocks(message)
                first = blocks[0] if blocks and isinstance(blocks[0], dict) else {}
                wanted = self.issued.get(_tool_ids(message))
                if first.get("type") != "thinking" or (
                    wanted is not None and first.get("thinking") != wanted
                ):
                    self.refused.append(body)
                    raise Refusal(400, _anthropic_error(DEEPSEEK_ANTHROPIC_MISSING))

    def think(self, answer: JSON, body: Mapping[str, Any]) -> None:
        if not self._thinking(body):
            return
        text = f"Let me think (#{next(self._numbers)}) about what the member asked."
        block = {"type": "thinking", "thinking": text, "signature": ""}
        answer["content"].insert(0, block)
        ids = _tool_ids(answer)
        if ids:
            self.issued[ids] = text


def _tool_ids(message: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(
        str(b.get("id", ""))
        for b in _blocks(message)
        if isinstance(b, dict) and b.get("type") == "tool_use"
    )


@dataclass
class ClaudeThinking:
    refused: list[object] = field(default_factory=list)
    key: bytes = b"fake-claude-signing-key"
    _numbers: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def sign(self, text: str) -> str:
        digest = hmac.new(self.key, text.encode(), hashlib.sha256).digest()
        return base64.b64encode(digest * 3).decode()  # signatures are long opaque base64

    def _refuse(self, body: Mapping[str, Any], message: str) -> Refusal:
        self.refused.append(body)
        return Refusal(400, _anthropic_error(message))

    def check(self, body: Mapping[str, Any]) -> None:
        if not _anthropic_thinking_on(body):
            return
        temperature = body.get("temperature")
        if temperature is not None and temperature != 1:
            raise self._refuse(body, CLAUDE_TEMPERATURE)
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        for index, message in enumerate(messages):
            for position, block in enumerate(_blocks(message)):
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "thinking":
                    signed = self.sign(str(block.get("thinking", "")))
                    if block.get("signature") != signed:
                        raise self._refuse(
                            body, CLAUDE_BAD_SIGNATURE.format(index=index, block=position)
                        )
                elif block.get("type") == "redacted_thinking":
                    data = str(block.get("data", ""))
                    if not data.startswith("redacted:") or self.sign(data[9:44]) != data[44:]:
                        raise self._refuse(
                            body, CLAUDE_BAD_SIGNATURE.format(index=index, block=position)
                        )
        if not messages or not _only_tool_results(messages[-1]):
            return
        last = max(i for i, m in enumerate(messages) if m.get("role") == "assistant")
        blocks = _blocks(messages[last])
        first = blocks[0] if blocks and isinstance(blocks[0], dict) else {}
        if first.get("type") not in ("thinking", "redacted_thinking"):
            found = str(first.get("type", "text"))
            raise self._refuse(body, CLAUDE_NOT_FIRST.format(index=last, found=found))

    def think(self, answer: JSON, body: Mapping[str, Any]) -> None:
        if not _anthropic_thinking_on(body):
            return
        number = next(self._numbers)
        text = f"The member wants an answer; thought #{number}."
        blocks: list[JSON] = [{"type": "thinking", "thinking": text, "signature": self.sign(text)}]
        if number % 3 == 0:
            nonce = hashlib.sha256(str(number).encode()).hexdigest()[:35]
            data = f"redacted:{nonce}{self.sign(nonce)}"
            blocks.append({"type": "redacted_thinking", "data": data})
        answer["content"][0:0] = blocks


@dataclass
class OllamaThinking:
    refused: list[object] = field(default_factory=list)
    _numbers: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def check(self, body: Mapping[str, Any]) -> None:
        return None

    def think(self, answer: JSON, body: Mapping[str, Any]) -> None:
        message = answer["choices"][0]["message"]
        message["reasoning"] = f"Okay, let me think (#{next(self._numbers)})."


@dataclass
class GeminiThinking:
    refused: list[object] = field(default_factory=list)
    issued: dict[str, str] = field(default_factory=dict)
    """Call id → the signature it came with."""

    def check(self, body: Mapping[str, Any]) -> None:
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
        start = users[-1] + 1 if users else 0
        for index in range(start, len(messages)):  # only the current turn is validated
            for call in messages[index].get("tool_calls") or []:
                wanted = self.issued.get(str(call.get("id")))
                if wanted is None:
                    continue
                extra = call.get("extra_content") or {}
                sent = (extra.get("google") or {}).get("thought_signature")
                if sent != wanted:
                    self.refused.append(body)
                    name = call.get("function", {}).get("name", "")
                    error = GEMINI_MISSING.format(name=name, position=index)
                    status = "INVALID_ARGUMENT"
                    wrapped = [{"error": {"code": 400, "message": error, "status": status}}]
                    raise Refusal(400, wrapped)  # Gemini wraps its error body in a list

    def think(self, answer: JSON, body: Mapping[str, Any]) -> None:
        calls = answer["choices"][0]["message"].get("tool_calls") or []
        if not calls:
            return
        first = calls[0]  # in parallel calls only the first carries the signature
        digest = hashlib.sha256(json.dumps(first, sort_keys=True).encode()).digest()
        signature = base64.b64encode(digest * 4).decode()
        first["extra_content"] = {"google": {"thought_signature": signature}}
        self.issued[str(first["id"])] = signature


__all__ = [
    "ClaudeThinking",
    "DeepSeekAnthropicThinking",
    "DeepSeekThinking",
    "GeminiThinking",
    "OllamaThinking",
    "Refusal",
    "ThinkingModel",
]

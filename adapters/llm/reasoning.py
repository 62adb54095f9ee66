"""Where a model's reasoning goes back on the wire: the one rule per provider, pure.

Reasoning comes back with an assistant message (`bot.domain.messages.Reasoning`) and is
stored with it; each wire decides, by the rules below, on which assistant messages of a
request it is sent again. Every rule is a function of the request's messages alone, so the
same history is written the same way on every call and the cached prefix stays
byte-identical from call to call (docs/architecture.md, Reasoning).

- **Text reasoning on the OpenAI wire** (`reasoning_content`: DeepSeek, vLLM, llama.cpp;
  `reasoning`: Ollama, OpenRouter) and **Anthropic thinking blocks** (Claude, DeepSeek's
  Anthropic-format endpoint): sent back on every assistant message of a *tool turn*, the
  messages between two user messages where the model made a tool call; dropped on turns
  without one. DeepSeek's rule word for word ("between two user messages, if the model
  performed a tool call, the intermediate assistant's reasoning_content must ... be passed
  back to the API in all subsequent user interactions"; without a tool call it "will be
  ignored"). Anthropic needs the current tool loop's blocks and lets earlier turns' blocks
  be sent or omitted; keeping every tool turn's blocks (and no others) is the same rule, so
  a turn's bytes never change once written. Local servers render what their chat template
  keeps.
- **Gemini thought signatures** (`extra_content.google.thought_signature` on tool calls):
  sent back on every tool call that carried one, in every turn. Gemini validates only the
  current turn but asks for all of them back as received.
- **DeepSeek** additionally gets an empty reasoning (`reasoning_content: ""`, or an empty
  thinking block on its Anthropic endpoint) on a tool turn's assistant message that has
  none: one written before reasoning was kept, by another model, or a tool call DeepSeek
  made without thinking. Its server refuses a tool turn without the field.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from bot.domain.messages import ChatMessage, Reasoning

JSON = dict[str, Any]


def tool_turn_messages(
    messages: Sequence[ChatMessage], *, boundaries: Iterable[str] = ("user",)
) -> frozenset[int]:
    """Indexes of the assistant messages of tool turns: a turn is what lies between two
    messages whose role is in `boundaries` (user messages; Anthropic also counts a system
    note inside the conversation, which it sends as a user message)."""
    roles = frozenset(boundaries)
    found: set[int] = set()
    turn: list[int] = []
    called = False
    for index, message in enumerate(messages):
        if message.role in roles:  # leading system messages come before any turn
            if called:
                found.update(turn)
            turn, called = [], False
            continue
        if message.role == "assistant":
            turn.append(index)
            called = called or bool(message.tool_calls)
    if called:
        found.update(turn)
    return frozenset(found)


def anthropic_blocks(reasoning: Reasoning | None) -> list[JSON]:
    """The `thinking` / `redacted_thinking` blocks kept for an Anthropic-wire message,
    exactly as received ([] for another format or a payload that is not a block list)."""
    if reasoning is None or reasoning.format != "anthropic" or not reasoning.payload:
        return []
    try:
        blocks = json.loads(reasoning.payload)
    except ValueError:
        return []
    if not isinstance(blocks, list):
        return []
    return [block for block in blocks if isinstance(block, dict)]


def anthropic_reasoning(blocks: Sequence[Mapping[str, Any]]) -> Reasoning | None:
    """The reasoning of a Messages response from its thinking blocks, in order."""
    if not blocks:
        return None
    text = "\n\n".join(
        str(block.get("thinking", "")) for block in blocks if block.get("type") == "thinking"
    )
    payload = json.dumps([dict(block) for block in blocks], ensure_ascii=False)
    return Reasoning(format="anthropic", text=text, payload=payload)


def gemini_signatures(reasoning: Reasoning | None) -> dict[str, str]:
    """Tool call id → thought signature, as kept for a Gemini message."""
    if reasoning is None or reasoning.format != "gemini" or not reasoning.payload:
        return {}
    try:
        signatures = json.loads(reasoning.payload)
    except ValueError:
        return {}
    if not isinstance(signatures, dict):
        return {}
    return {str(k): v for k, v in signatures.items() if isinstance(v, str)}


def gemini_reasoning(signatures: Mapping[str, str], text: str = "") -> Reasoning | None:
    """The reasoning of a Gemini response: its tool calls' signatures (and any text)."""
    if not signatures:
        return None
    payload = json.dumps(dict(signatures), ensure_ascii=False)
    return Reasoning(format="gemini", text=text, payload=payload)


__all__ = [
    "anthropic_blocks",
    "anthropic_reasoning",
    "gemini_reasoning",
    "gemini_signatures",
    "tool_turn_messages",
]

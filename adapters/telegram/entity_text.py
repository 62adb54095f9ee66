"""The entities that carry meaning the text alone does not show, written into the text.

- `text_link`: "look here" points somewhere; it reads `look here <https://…>`.
- `text_mention`: a mention of a user without a username; it reads `Alice (user_id:1001)`.

Every other entity (bold, code, spoilers, plain mentions and URLs already in the text) is
formatting and stays out of the model's view. Offsets are UTF-16 code units, as Telegram
counts them; the walk is one pass over the entities in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from adapters.telegram.text_units import utf16_len

_MEANINGFUL = frozenset({"text_link", "text_mention"})


def with_meaning(text: str, entities: Sequence[Any] | None) -> str:
    """`text` with each link's URL and each text mention's user id after its words."""
    if not text or not entities:
        return text
    inserts: list[tuple[int, str]] = []  # (UTF-16 end offset, what to add there)
    for entity in entities:
        if entity.type not in _MEANINGFUL:
            continue
        end = entity.offset + entity.length
        if entity.type == "text_link" and entity.url:
            inserts.append((end, f" <{entity.url}>"))
        elif entity.type == "text_mention" and entity.user is not None:
            inserts.append((end, f" (user_id:{entity.user.id})"))
    if not inserts:
        return text
    inserts.sort(key=lambda item: item[0])
    out: list[str] = []
    units = 0  # UTF-16 position of `index` in `text`
    index = 0
    copied = 0  # how much of `text` is already in `out`
    for end, addition in inserts:
        while index < len(text) and units < end:
            units += utf16_len(text[index])
            index += 1
        out.append(text[copied:index])
        out.append(addition)
        copied = index
    out.append(text[copied:])
    return "".join(out)

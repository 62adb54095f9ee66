"""What a told-user note says about a message sent outside a model turn: one line
(`told_line`), and for a text that carries a secret only its redacted form (`SecretText`,
`retold`).

The book those lines go in (`ToldUser`) and the messenger that fills it are in
`bot.services.messenger_relay`; a mention's reply is the model's own and notes nothing.
"""

from __future__ import annotations

MAX_LINE_CHARS = 120


class SecretText(str):
    """A message text that carries a secret (the owner's one-time dashboard login link):
    sent as it is, but retold only as `told_as` (in `[Already told the user]`, so never in
    a model request, a call's trace or the shared notes table)."""

    told_as: str

    def __new__(cls, text: str, *, told_as: str) -> SecretText:
        made = super().__new__(cls, text)
        made.told_as = told_as
        return made


def retold(text: str) -> str:
    """What a note may say about `text`: its redacted form when it carries a secret."""
    return text.told_as if isinstance(text, SecretText) else text


def told_line(text: str) -> str:
    """One line for `text`: its first non-empty line, whitespace collapsed, ≤120 chars."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    line = " ".join(first.split())
    more = line != " ".join(text.split())
    if len(line) > MAX_LINE_CHARS or (more and len(line) + 1 > MAX_LINE_CHARS):
        return line[: MAX_LINE_CHARS - 1].rstrip() + "…"
    return line + "…" if more else line

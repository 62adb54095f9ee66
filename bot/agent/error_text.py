"""An exception as one short, redacted line: what the usage ledger, the traces, the error
log and the tracing spans say went wrong (`describe_error`)."""

from __future__ import annotations

from bot.redact import scrub

MAX_ERROR_CHARS = 300


def describe_error(exc: BaseException) -> str:
    """`ClassName: short message` for the ledger, with token-like substrings redacted."""
    text = scrub(" ".join(str(exc).split()))
    if len(text) > MAX_ERROR_CHARS:
        text = text[: MAX_ERROR_CHARS - 1] + "…"
    name = type(exc).__name__
    return f"{name}: {text}" if text else name

"""The one place that keeps secrets out of log lines, ledger lines and error messages.

`register_secret` adds a value (the bot token, LLM keys, the webhook secret); `scrub`
replaces every known form of every registered value with `[redacted]`:
- the raw value;
- URL-encoded (`quote` with and without `/` kept safe, `quote_plus`): a Bot API error
  that echoes the request path, an LLM error that echoes a query string;
- inside base64 (standard and URL-safe alphabets, at each of the three byte alignments, so
  a secret in the middle of an encoded `user:key` pair is found too);
- for a bot token `<id>:<secret>`, the secret half on its own;
- and, registered or not, anything shaped like a secret (`SECRET_SHAPES`: a bot token, an
  `sk-…` key, a bearer credential, `key=`/`token=`/`secret=` parameters).

`install_log_scrubbing` puts `scrub` into every log record as it is created (a log record
factory: message, arguments, traceback and stack), so no handler, formatter or test capture
ever sees a secret, and keeps chatty third-party DEBUG loggers (HTTP clients printing
request and response headers) at WARNING. `bot.agent.error_text.describe_error` and the tool
runner's error results call `scrub` too.
"""

from __future__ import annotations

import base64
import logging
import re
import threading
from urllib.parse import quote, quote_plus

REDACTED = "[redacted]"
MIN_SECRET_CHARS = 6
"""Shorter values are not registered (they would redact ordinary words)."""

QUIET_LOGGERS = (
    "httpcore",
    "httpx",
    "hpack",
    "h2",
    "urllib3",
    "openai",
    "aiohttp.client",
    "aiohttp.access",
    "aiohttp.internal",
    "aiohttp.server",
    "aiohttp.web",
)
"""Third-party loggers that print URLs, request or response headers at DEBUG/INFO."""

SECRET_SHAPES = (
    re.compile(r"\d{5,}:[A-Za-z0-9_-]{30,}"),  # Telegram bot token (also inside /bot<token>/)
    re.compile(r"\bsk-[A-Za-z0-9_-]{8,}"),  # OpenAI-style API key
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"(?i)\b(api[_-]?key|token|secret|password)=[^\s&]+"),
)

_lock = threading.Lock()
_forms: set[str] = set()
_pattern: re.Pattern[str] | None = None


def _base64_fragments(raw: bytes) -> set[str]:
    """The base64 characters that depend only on `raw`, for each alignment of `raw` inside
    a longer encoded string (standard and URL-safe alphabets, unpadded)."""
    found: set[str] = set()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw).decode().rstrip("=")
        start = -(-8 * offset // 6)  # first character made of `raw` bits only
        end = (8 * (offset + len(raw))) // 6  # characters complete before the end
        fragment = encoded[start:end]
        if len(fragment) >= MIN_SECRET_CHARS:
            found.add(fragment)
            found.add(fragment.replace("+", "-").replace("/", "_"))
    return found


def forms_of(secret: str) -> set[str]:
    """Every form of `secret` that `scrub` looks for."""
    values = {secret}
    head, sep, tail = secret.partition(":")
    if sep and head.isdigit() and len(tail) >= MIN_SECRET_CHARS:  # a bot token
        values.add(tail)
    forms: set[str] = set()
    for value in values:
        forms |= {value, quote(value, safe=""), quote(value), quote_plus(value)}
        forms |= _base64_fragments(value.encode())
    return {form for form in forms if len(form) >= MIN_SECRET_CHARS}


def register_secret(secret: str | None) -> None:
    """Scrub `secret` (in all its forms) from now on; short or empty values are ignored."""
    global _pattern
    if secret is None or len(secret) < MIN_SECRET_CHARS:
        return
    with _lock:
        new = forms_of(secret) - _forms
        if not new:
            return
        _forms.update(new)
        ordered = sorted(_forms, key=len, reverse=True)  # the longest form wins
        _pattern = re.compile("|".join(re.escape(form) for form in ordered), re.IGNORECASE)


def scrub(text: str) -> str:
    """`text` with every registered secret replaced by `[redacted]`."""
    if not text:
        return text
    pattern = _pattern
    if pattern is not None:
        text = pattern.sub(REDACTED, text)
    for shape in SECRET_SHAPES:
        text = shape.sub(REDACTED, text)
    return text


_installed = False


def install_log_scrubbing() -> None:
    """Scrub every log record as it is created (idempotent), and keep the HTTP clients'
    loggers at WARNING, whatever the root level."""
    global _installed
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    if _installed:
        return
    _installed = True
    previous = logging.getLogRecordFactory()

    def factory(*args: object, **kwargs: object) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: leave it to the handler's error path
            return record
        record.msg = scrub(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = scrub(logging.Formatter().formatException(record.exc_info))
        if record.stack_info:
            record.stack_info = scrub(record.stack_info)
        return record

    logging.setLogRecordFactory(factory)

"""An LLM provider's error response read as the `ProviderError` branch of `bot.errors`.

No I/O. `classify_error` reads a status, a body (OpenAI's `{"error": {...}}`, Anthropic's
`{"type": "error", "error": {...}}`, Gemini's list, plain text) and the headers into the
branch the caller acts on (rate limited with its `Retry-After`, context overflow with the
window and size the body names, unavailable, rejected); both wires (`openai_wire`,
`anthropic_wire`) and the provider use it. What a failed attempt becomes for the provider's
retry loop (`FailedAttempt`: whether another attempt may help) and the key scrubbed out of an
error's message are here too. A rare path: a healthy turn never reads one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Literal

from bot.context.bounded_json import loads_bounded
from bot.errors import (
    ContextOverflow,
    ProviderBadResponse,
    ProviderError,
    ProviderRateLimited,
    ProviderRejected,
    ProviderUnavailable,
)

_OVERFLOW_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error"})
# one phrase per provider family (each from a fixture under tests/fixtures/llm/); alternation
# of literals only, so matching stays linear
_OVERFLOW_PHRASES = re.compile(
    r"maximum context length|prompt is too long|context window|too many tokens"
    r"|context_length_exceeded|exceeds the available context size|range of input length"
    r"|exceeded model token limit|exceeds the maximum number of tokens|maximum prompt length"
    r"|input length exceeds|input is too long|longer than the context length",
    re.IGNORECASE,
)
# the window and the request's size where an overflow body says them (one phrase per
# provider family, from the fixtures under tests/fixtures/llm/); literals and digits only
_OVERFLOW_LIMIT = re.compile(
    r"maximum (?:context|prompt) length is (\d+)|(?<!\d)(\d+) maximum|tokens allowed \((\d+)\)"
    r"|context size \((\d+) tokens\)|model token limit: (\d+)|input length should be \[1, (\d+)\]",
    re.IGNORECASE,
)
_OVERFLOW_REQUESTED = re.compile(
    r"resulted in (\d+) tokens|requested (?:about )?(\d+) tokens|too long: (\d+) tokens"
    r"|input token count \((\d+)\)|request \((\d+) tokens\)|\(requested: (\d+)\)"
    r"|request contains (\d+) tokens",
    re.IGNORECASE,
)
_MAX_ERROR_TEXT = 300


def classify_error(
    status: int,
    body: Mapping[str, Any] | list[Any] | str,
    headers: Mapping[str, str] | None = None,
    *,
    now: datetime | None = None,
) -> ProviderError:
    """The `ProviderError` an error response means; the provider's own message is kept."""
    message, code = _error_message_and_code(body)
    described = f"HTTP {status}: {message}" if message else f"HTTP {status}"
    if status == 429:
        return ProviderRateLimited(described, retry_after=retry_after_seconds(headers, now=now))
    if 400 <= status < 500 and (code in _OVERFLOW_CODES or _OVERFLOW_PHRASES.search(message)):
        return ContextOverflow(
            described,
            limit=_first_number(_OVERFLOW_LIMIT, message),
            requested=_first_number(_OVERFLOW_REQUESTED, message),
        )
    if status >= 500:
        return ProviderUnavailable(described)
    if 400 <= status < 500:
        return ProviderRejected(described)
    return ProviderBadResponse(described)


def _first_number(pattern: re.Pattern[str], message: str) -> int | None:
    """The number the first match of `pattern` in `message` captured (None: no match)."""
    found = pattern.search(message)
    if found is None:
        return None
    number = next(group for group in found.groups() if group is not None)
    return int(number)


def _error_message_and_code(body: object) -> tuple[str, str | None]:
    if isinstance(body, str):
        try:
            parsed = loads_bounded(body)  # a hostile body nests 100,000 deep
        except ValueError:
            return _clip(body), None
        if isinstance(parsed, list) and parsed and isinstance(parsed[0], dict):
            parsed = parsed[0]  # Gemini wraps its error body in a list
        if not isinstance(parsed, dict):
            return _clip(body), None
        body = parsed
    if isinstance(body, list) and body and isinstance(body[0], Mapping):
        body = body[0]
    if not isinstance(body, Mapping):
        return _clip(str(body)), None
    error = body.get("error", body)
    if isinstance(error, str):
        return _clip(error), None
    if not isinstance(error, Mapping):
        return _clip(json.dumps(body, ensure_ascii=False, default=str)), None
    message = error.get("message") or error.get("detail") or body.get("detail") or ""
    if not isinstance(message, str):
        message = json.dumps(message, ensure_ascii=False, default=str)
    metadata = error.get("metadata")
    raw = metadata.get("raw") if isinstance(metadata, Mapping) else None
    if raw is not None:  # OpenRouter: the upstream provider's own error, which says why
        said = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False, default=str)
        message = f"{message} (upstream: {said})" if message else said
    code = error.get("code")
    if not isinstance(code, str):  # llama.cpp and Gemini send the HTTP status as the code
        code = error.get("type") or error.get("status")
    return _clip(message), code if isinstance(code, str) else None


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_ERROR_TEXT else text[: _MAX_ERROR_TEXT - 1] + "…"


def retry_after_seconds(
    headers: Mapping[str, str] | None, *, now: datetime | None = None
) -> float | None:
    """`retry-after-ms`, else `Retry-After` (seconds or an HTTP date); `None` when absent."""
    if not headers:
        return None
    lowered = {key.lower(): value for key, value in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def error_in_body(body: Mapping[str, Any]) -> ProviderError:
    """The error a 2xx body (or a stream chunk) carries; its `code` gives the status when it
    is an HTTP status, else it counts as an upstream failure (502)."""
    error = body.get("error")
    code = error.get("code") if isinstance(error, Mapping) else None
    status = code if isinstance(code, int) and 400 <= code < 600 else 502
    return classify_error(status, body)


class FailedAttempt(Exception):
    """One failed attempt: the error to raise and whether another attempt may help."""

    def __init__(
        self,
        error: ProviderError,
        *,
        kind: Literal["transient", "bad_body", "final"] = "transient",
        retry_after: float | None = None,
    ) -> None:
        super().__init__(str(error))
        self.error = error
        self.kind = kind
        self.retry_after = retry_after


def failed_attempt(error: ProviderError, headers: Mapping[str, str] | None) -> FailedAttempt:
    """`error` as a failed attempt: retried after its wait when rate limited or unavailable,
    never when the request itself is wrong."""
    match error:
        case ProviderRateLimited():
            return FailedAttempt(error, retry_after=error.retry_after)
        case ProviderUnavailable():
            # a 503 may also say when to come back
            return FailedAttempt(error, retry_after=retry_after_seconds(headers))
        case _:
            return FailedAttempt(error, kind="final")


def scrubbed(error: ProviderError, secret: str | None) -> ProviderError:
    """`error` with the key taken out of its message."""
    text = scrub(str(error), secret)
    if text == str(error):
        return error
    if isinstance(error, ProviderRateLimited):
        return ProviderRateLimited(text, retry_after=error.retry_after)
    if isinstance(error, ContextOverflow):
        return ContextOverflow(text, limit=error.limit, requested=error.requested)
    return type(error)(text)


def scrub(text: str, secret: str | None) -> str:
    """`text` with `secret` (the API key) replaced by `***`."""
    if secret and secret in text:
        return text.replace(secret, "***")
    return text


__all__ = (
    "FailedAttempt",
    "classify_error",
    "error_in_body",
    "failed_attempt",
    "retry_after_seconds",
    "scrub",
    "scrubbed",
)

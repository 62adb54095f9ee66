"""The project's one error tree. Adapters translate foreign exceptions into it (`raise ... from`).

    BotError                         base of everything we raise on purpose
    ├── ConfigError                  a setting is missing or invalid; start-up stops with one line
    ├── NotBuiltError                a command that is not available in this build
    ├── StorageError                 the database refused or lost a write
    │   ├── StorageUnavailable       the database failed a read or write; retry later
    │   └── SessionNotFound          no such session / record
    ├── ContextError                 the request cannot be built
    │   ├── CapacityExceeded         the request does not fit the model window; says what to change
    │   └── ReferenceNotConfirmed    a message alias the turn never showed, or an `unknown` slot
    ├── ProviderError                the LLM provider failed
    │   ├── ContextOverflow          the provider said the prompt is too long (recoverable by trim)
    │   ├── ProviderRateLimited      429; `retry_after` seconds when the provider said so
    │   ├── ProviderUnavailable      5xx, timeout or network failure after the bounded retries
    │   ├── ProviderRejected         a 4xx that is not an overflow: the provider refused the request
    │   └── ProviderBadResponse      malformed JSON, empty reply, a response we cannot map
    ├── TelegramError                the Bot API refused or could not be reached
    │   ├── TelegramFloodWait        flood control; `retry_after` seconds
    │   ├── TelegramForbidden        the bot was blocked or removed from the chat
    │   ├── TelegramBadRequest       e.g. the message to reply to or delete is gone
    │   └── TelegramNetworkError     the Bot API could not be reached
    ├── ToolError                    a tool failed; becomes a tool result the model reads
    ├── BudgetExceeded               a spend limit is reached; the model call was not made
    └── MediaRefused                 a member's file was not fetched or not accepted (too large,
                                     not an image, a decompression bomb, a stalled download)

What a caller can do follows the branch: `ContextOverflow` → trim and retry once;
`ProviderRateLimited`/`TelegramFloodWait` → wait `retry_after`; `ProviderRejected` → do not
ask again: the member hears the provider refused, the operator reads its own words;
`TelegramForbidden` → stop writing to that chat; `StorageUnavailable` → leave the update
unconfirmed (it comes again); `ToolError` and `ReferenceNotConfirmed` → tell the model, not
the user; `MediaRefused` → skip the file and say why (a tool error, or a line of the
`[Images]` block), the turn goes on.
"""

from __future__ import annotations


class BotError(Exception):
    """Base of the tree."""


class ConfigError(BotError):
    """A setting is missing or invalid, or a resource it names (the database, DATA_DIR, the
    Bot API) refused at start-up. `setting` names it; `source` is the file it was read from,
    when it came from one (`bot.toml: history.group_tokens: …`)."""

    def __init__(self, setting: str, message: str, *, source: str | None = None) -> None:
        super().__init__(f"{source}: {setting}: {message}" if source else f"{setting}: {message}")
        self.setting = setting
        self.source = source


class NotBuiltError(BotError):
    """A command or feature that is not available in this build."""


class StorageError(BotError):
    """The database refused or lost a write."""


class StorageUnavailable(StorageError):
    """A read or write failed in the database (locked, down, connection lost): the caller
    may retry; an inbound update is left unconfirmed so it is delivered again."""


class SessionNotFound(StorageError):
    """No such session or record."""


class ContextError(BotError):
    """The request to the model cannot be built."""


class CapacityExceeded(ContextError):
    """The request does not fit the resolved model window, even after trimming."""


class ReferenceNotConfirmed(ContextError):
    """A message reference the model used is not an alias this turn showed, or is `unknown`."""

    def __init__(self, reference: str) -> None:
        super().__init__(
            f"reference not confirmed: {reference!r} is not a message alias shown in this "
            "conversation (or its delivery was not confirmed); nothing was sent"
        )
        self.reference = reference


class ProviderError(BotError):
    """The LLM provider failed."""


class ContextOverflow(ProviderError):
    """The provider reported that the prompt exceeds the model's context window.

    `limit` and `requested` are the window and the request's size in the provider's tokens,
    when its error body says them (None when it does not, as Ollama's does not)."""

    def __init__(
        self, message: str, *, limit: int | None = None, requested: int | None = None
    ) -> None:
        super().__init__(message)
        self.limit = limit
        self.requested = requested


class ProviderRateLimited(ProviderError):
    """429 from the provider; `retry_after` is in seconds when the provider said so."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ProviderUnavailable(ProviderError):
    """5xx, timeout or network failure that outlived the bounded retries."""


class ProviderRejected(ProviderError):
    """The provider refused the request with a 4xx that is not an overflow (a bad parameter,
    a wrong endpoint, a missing permission): asking again will not help. The message is the
    provider's own (scrubbed of secrets), for the operator."""


class ProviderBadResponse(ProviderError):
    """Malformed JSON, an empty reply, or a response that cannot be mapped."""


class TelegramError(BotError):
    """The Bot API refused a request or could not be reached."""


class TelegramFloodWait(TelegramError):
    """Flood control; wait `retry_after` seconds."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class TelegramForbidden(TelegramError):
    """The bot was blocked by the user or removed from the chat."""


class TelegramBadRequest(TelegramError):
    """The Bot API rejected the request (message gone, text empty, …)."""


class TelegramNetworkError(TelegramError):
    """The Bot API could not be reached."""


class ToolError(BotError):
    """A tool failed. `code` is a short machine-readable code the model sees."""

    def __init__(self, message: str, code: str = "tool_error") -> None:
        super().__init__(message)
        self.code = code


class BudgetExceeded(BotError):
    """A spend limit (`[limits]`) is reached, so the model call was not made. `scope` says
    which (`member`, `chat`, `day`, `month`); `notice` is what the chat is told, `None` when
    it was already told this period (then the turn ends in silence)."""

    def __init__(self, scope: str, message: str, *, notice: str | None = None) -> None:
        super().__init__(message)
        self.scope = scope
        self.notice = notice


class MediaRefused(BotError):
    """A member's file was not fetched or not accepted; `reason` says why in words the model
    reads ("the file is 31 MB, over the 20 MB limit"). The turn goes on without it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

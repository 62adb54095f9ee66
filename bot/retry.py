"""One bounded retry with exponential backoff, for errors that say nothing about the input.

Used where a failed attempt is retried the same way: a storage hiccup while handling an
update (`adapters.telegram.polling_loop`) or storing a batch (`storage.inbound_batch`).
Retries with their own rules keep their own loop: the model call (`Retry-After`, jitter,
kinds of failure), Telegram's flood wait (one wait, as long as Telegram asks), polling
(unbounded until stop) and SQLite's switch to WAL (synchronous, until a deadline).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def with_retries(
    attempt: Callable[[], Awaitable[T]],
    *,
    retries: int,
    first_delay: float,
    transient: tuple[type[Exception], ...],
    retry_if: Callable[[Exception], bool] = lambda _exc: True,
    on_retry: Callable[[Exception], None] | None = None,
) -> T:
    """`attempt()`, tried again at most `retries` times after a `transient` error that
    `retry_if` accepts, waiting `first_delay * 2**n` before retry `n + 1`.

    Any other error, and the transient error of the last try, is raised as it is.
    """
    for n in range(retries):
        try:
            return await attempt()
        except transient as exc:
            if not retry_if(exc):
                raise
            if on_retry is not None:
                on_retry(exc)
        await asyncio.sleep(first_delay * 2**n)
    return await attempt()

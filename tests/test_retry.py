"""`bot.retry.with_retries`: how many tries, which errors, and the waits between them."""

from __future__ import annotations

import asyncio

import pytest

from bot.retry import with_retries


class Flaky:
    """Fails with the given errors in turn, then answers "ok"; counts its tries."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.tries = 0

    async def __call__(self) -> str:
        self.tries += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The delays asked of `asyncio.sleep`, without waiting them."""
    asked: list[float] = []
    real_sleep = asyncio.sleep

    async def record(delay: float) -> None:
        asked.append(delay)
        await real_sleep(0)

    monkeypatch.setattr("bot.retry.asyncio.sleep", record)
    return asked


async def test_a_transient_error_is_retried_with_doubling_waits(waits: list[float]) -> None:
    attempt = Flaky(OSError("a"), OSError("b"))
    got = await with_retries(attempt, retries=3, first_delay=0.5, transient=(OSError,))
    assert (got, attempt.tries, waits) == ("ok", 3, [0.5, 1.0])


async def test_the_last_transient_error_is_raised(waits: list[float]) -> None:
    attempt = Flaky(OSError("1"), OSError("2"), OSError("3"))
    with pytest.raises(OSError, match="3"):
        await with_retries(attempt, retries=2, first_delay=0.1, transient=(OSError,))
    assert (attempt.tries, waits) == (3, [0.1, 0.2])


async def test_another_error_is_raised_at_once(waits: list[float]) -> None:
    attempt = Flaky(KeyError("bug"))
    with pytest.raises(KeyError):
        await with_retries(attempt, retries=4, first_delay=0.1, transient=(OSError,))
    assert (attempt.tries, waits) == (1, [])


async def test_retry_if_turns_a_transient_error_down(waits: list[float]) -> None:
    seen: list[str] = []
    attempt = Flaky(ValueError("wait"), ValueError("bad row"))
    with pytest.raises(ValueError, match="bad row"):
        await with_retries(
            attempt,
            retries=4,
            first_delay=0.1,
            transient=(ValueError,),
            retry_if=lambda exc: str(exc) != "bad row",
            on_retry=lambda exc: seen.append(str(exc)),
        )
    assert (attempt.tries, waits, seen) == (2, [0.1], ["wait"])

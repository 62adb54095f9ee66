"""Never silently deaf: every completed getUpdates feeds systemd's watchdog over a real
datagram socket (a fake NOTIFY_SOCKET), and the bot counts as deaf past its bound."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.systemd_notify import notify_address, sd_notify, systemd_notifier
from adapters.telegram.update_health import UpdateHealth


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    """systemd's end: a datagram socket bound where NOTIFY_SOCKET points."""
    path = str(tmp_path / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(path)
        sock.settimeout(5)
        yield sock, path


def received(sock: socket.socket, count: int) -> list[str]:
    return [sock.recv(4096).decode() for _ in range(count)]


def test_every_completed_poll_feeds_the_watchdog_after_one_ready(
    notify_socket: tuple[socket.socket, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sock, path = notify_socket
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    health = UpdateHealth(stall_seconds=60, now=Clock(), notify=systemd_notifier())

    health.polled()
    health.polled()

    assert received(sock, 3) == ["READY=1", "WATCHDOG=1", "WATCHDOG=1"]


def test_a_bot_that_stops_reading_stops_feeding_the_watchdog_and_says_why(
    notify_socket: tuple[socket.socket, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sock, path = notify_socket
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    clock = Clock()
    health = UpdateHealth(stall_seconds=60, now=clock, notify=systemd_notifier())
    health.polled()
    assert received(sock, 2) == ["READY=1", "WATCHDOG=1"]

    clock.now += 59
    assert health.stalled() is None
    clock.now += 2
    assert health.stalled() == "no getUpdates completed for 61 s (bound 60 s)"
    assert health.age() == 61
    sock.settimeout(0.05)
    with pytest.raises(TimeoutError):  # nothing was sent while nothing was read
        sock.recv(4096)

    health.polled()
    assert health.stalled() is None


def test_before_the_first_poll_the_bound_runs_from_the_start() -> None:
    clock = Clock()
    health = UpdateHealth(stall_seconds=10, now=clock, notify=lambda state: False)
    clock.now += 11
    assert health.stalled() == "no getUpdates since start completed for 11 s (bound 10 s)"


def test_webhook_errors_that_telegram_reports_make_the_bot_deaf() -> None:
    health = UpdateHealth(stall_seconds=10, now=Clock(), notify=lambda state: False)
    health.webhook_checked("Wrong response from the webhook: 502 Bad Gateway")
    assert health.stalled() == (
        "Telegram reports webhook delivery errors: Wrong response from the webhook: 502 Bad Gateway"
    )
    health.webhook_checked(None)
    assert health.stalled() is None


def test_outside_systemd_nothing_is_sent() -> None:
    assert notify_address({}) is None
    assert sd_notify("WATCHDOG=1", environ={}) is False
    assert notify_address({"NOTIFY_SOCKET": "@tgbot/notify"}) == "\0tgbot/notify"
    assert systemd_notifier({}) is None
    assert systemd_notifier({"NOTIFY_SOCKET": "@tgbot/notify"}) is not None


def test_without_a_notifier_polling_pings_nothing() -> None:
    health = UpdateHealth(stall_seconds=10, now=Clock())
    health.polled()
    assert health.stalled() is None

"""`sd_notify` without a dependency: one datagram to systemd's `NOTIFY_SOCKET`.

Under `Type=notify` with `WatchdogSec=`, the service says `READY=1` once and then
`WATCHDOG=1` at least every half of that interval; systemd restarts it when the pings stop
(systemd.service(5), sd_notify(3)). The socket is a path or, starting with `@`, an abstract
socket. Outside systemd (no `NOTIFY_SOCKET`) every call does nothing, and `systemd_notifier`
says so once: there is nothing to ping.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Mapping
from functools import partial

log = logging.getLogger(__name__)


def notify_address(environ: Mapping[str, str] | None = None) -> str | None:
    """The notify socket's address from `NOTIFY_SOCKET` (abstract: `@` becomes NUL), or
    None outside systemd."""
    raw = (os.environ if environ is None else environ).get("NOTIFY_SOCKET", "")
    if not raw or raw[0] not in "/@":
        return None  # unset, or a vsock address this helper does not speak
    return "\0" + raw[1:] if raw[0] == "@" else raw


def sd_notify(state: str, *, environ: Mapping[str, str] | None = None) -> bool:
    """Send `state` (`READY=1`, `WATCHDOG=1`, `STATUS=...`) to systemd; False when there is
    no notify socket or the send failed (logged: a missed ping is not an error here)."""
    address = notify_address(environ)
    if address is None:
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.sendto(state.encode(), address)
    except OSError as exc:
        log.warning("sd_notify %s failed: %s", state.split("=", 1)[0], exc)
        return False
    return True


def systemd_notifier(environ: Mapping[str, str] | None = None) -> Callable[[str], bool] | None:
    """`sd_notify` when a notify socket is set now, else None: a caller outside systemd
    (the usual run) skips its pings instead of reading the environment for each one."""
    if notify_address(environ) is None:
        return None
    return partial(sd_notify, environ=environ)

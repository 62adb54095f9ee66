"""In a real browser: the overview's cards and charts follow the live feed without a reload;
the error list; a trace on an unpriced route says "no prices configured". Screenshots go to
`tests/artifacts/` (the 420-px ones are kept in `docs/`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.agent.ledger import LedgerEntry
from bot.agent.ledger_file import LedgerWriter
from bot.agent.ledger_read import read_entries
from bot.services.error_log import ErrorLog
from tests.test_app.test_dashboard.conftest import DemoData
from tests.test_app.test_dashboard.test_browser import (  # noqa: F401 (fixtures)
    ARTIFACTS,
    blocking,
    browser,
    data_copy,
    open_site,
    screenshot,
    wait_for,
)
from tests.test_app.test_dashboard.test_live_figures import live_call

pytestmark = pytest.mark.slow


READ_TEXT = "var e = document.querySelector(arguments[0]); return e ? e.textContent : null"
"""Read in one script: the live refresh may swap an element between two WebDriver calls."""


def _text(driver: Any, css: str) -> str | None:
    text: str | None = driver.execute_script(READ_TEXT, css)
    return text


def _text_is(css: str, expected: str) -> Any:
    return lambda driver: _text(driver, css) == expected


async def _until(driver: Any, condition: Any, seconds: float = 20) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    await blocking(lambda: WebDriverWait(driver, seconds).until(condition))


def _call(data: DemoData, **fields: object) -> LedgerEntry:
    """The live-figures call, with a cache hit of 90 % and a latency the page shows."""
    return live_call(data, **{"cached_tokens": 4500, "latency_ms": 700, **fields})


async def test_the_cards_and_charts_follow_the_live_feed(
    browser: Any,  # noqa: F811
    open_site: str,  # noqa: F811
    data_copy: DemoData,  # noqa: F811
) -> None:

    await blocking(lambda: browser.get(open_site + "/"))
    await blocking(lambda: wait_for(browser, "#live-status", text="connected"))

    def number(css: str) -> int:
        return int((_text(browser, css) or "").replace(",", ""))

    calls = number('[data-total="calls"]')
    today = datetime.now(UTC).date()
    day_cell = f'tr[data-day="{today.isoformat()}"] [data-field="calls"]'
    today_calls = number(day_cell)
    browser.execute_script("window.notReloaded = true")

    writer = LedgerWriter(data_copy.data_dir / "agent-traces", UTC)
    writer.append(_call(data_copy))
    await _until(browser, _text_is('[data-total="calls"]', f"{calls + 1:,}"))
    await _until(browser, _text_is(day_cell, f"{today_calls + 1:,}"))
    # the chart of calls per day has today's bar at the new count
    bars = browser.execute_script(
        "return Array.from(document.querySelectorAll('#charts svg.chart title'),"
        " t => t.textContent)"
    )
    assert f"{today:%m-%d}: {today_calls + 1:,}" in bars
    # a failed call moves the error count too
    errors = number('[data-total="errors"]')
    writer.append(_call(data_copy, turn_id="live-fail", error="ProviderUnavailable: 503"))
    await _until(browser, _text_is('[data-total="errors"]', str(errors + 1)))
    assert _text(browser, '[data-total="calls"]') == f"{calls + 2:,}"
    assert browser.execute_script("return window.notReloaded === true"), "the page reloaded"
    assert _text(browser, "#live-status") == "connected"  # an `error` event is no disconnect
    assert _text(browser, '#spend-models tr[data-model="default/live-model"]') is not None
    await blocking(lambda: screenshot(browser, "overview-live"))
    browser.set_window_size(1024, 864)  # the top of the page, as docs/dashboard.png shows it
    try:
        browser.save_screenshot(str(ARTIFACTS / "dashboard.png"))
    finally:
        browser.set_window_size(1280, 900)


async def test_the_error_list_in_a_browser(
    browser: Any,  # noqa: F811
    open_site: str,  # noqa: F811
    data_copy: DemoData,  # noqa: F811
) -> None:
    from selenium.webdriver.common.by import By

    traces = data_copy.data_dir / "agent-traces"
    # the demo's calls all succeed: a failed line that names one of their stored traces
    real = next(e for e in read_entries(traces) if e.call_id and e.purpose == "turn")
    LedgerWriter(traces, UTC).append(
        _call(
            data_copy,
            ts=datetime.now(UTC) - timedelta(minutes=2),
            turn_id="t-fail",
            input_tokens=None,
            cached_tokens=None,
            output_tokens=None,
            error="ProviderUnavailable: 502 Bad Gateway from the upstream <proxy>",
            call_id=real.call_id,
        )
    )
    log = ErrorLog(traces, UTC)
    log.skipped_update(777001, "message.forward_origin: Input tag 'story_repost' found")
    from bot.errors import TelegramForbidden

    log.refused_send(data_copy.group_chat, TelegramForbidden("Forbidden: bot was kicked"))

    await blocking(lambda: browser.get(open_site + "/errors"))
    await blocking(lambda: wait_for(browser, "#errors"))
    kinds = [
        r.get_attribute("data-kind")
        for r in browser.find_elements(By.CSS_SELECTOR, "#errors tbody tr")
    ]
    assert sorted(kinds[:2]) == ["refused_send", "skipped_update"]
    assert kinds[2] == "failed_call"
    failed = browser.find_element(By.CSS_SELECTOR, '#errors tr[data-kind="failed_call"]')
    assert "<proxy>" in failed.text  # as text
    await blocking(lambda: screenshot(browser, "errors"))

    browser.set_window_size(420, 900)
    try:
        width = browser.execute_script("return document.documentElement.scrollWidth")
        inner = browser.execute_script("return window.innerWidth")
        browser.save_screenshot(str(ARTIFACTS / "error-list-420px.png"))
        assert width <= inner, f"/errors is {width} px wide in a {inner}-px window"
    finally:
        browser.set_window_size(1280, 900)

    # the failed call links to its trace
    link = failed.find_element(By.CSS_SELECTOR, "a.call")
    await blocking(link.click)
    await blocking(lambda: wait_for(browser, "#figures"))
    assert real.call_id in browser.find_element(By.TAG_NAME, "h1").text


async def test_an_unpriced_trace_says_no_prices_configured(
    browser: Any,  # noqa: F811
    open_site: str,  # noqa: F811
    data_copy: DemoData,  # noqa: F811
) -> None:
    from selenium.webdriver.common.by import By

    traces = data_copy.data_dir / "agent-traces"
    entry = next(e for e in read_entries(traces) if e.call_id and e.purpose == "turn")
    await blocking(lambda: browser.get(f"{open_site}/calls/{entry.call_id}"))
    cost = await blocking(lambda: wait_for(browser, '#figures [data-field="cost"]'))
    assert cost.text == "no prices configured"
    assert "0.0000" not in browser.find_element(By.ID, "figures").text

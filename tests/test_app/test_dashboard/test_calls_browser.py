"""The trace page in a real browser (issue 27 item 5): from a chat's recent turns to
`/calls/{call_id}`, the request message by message, the reply and the figures; a live model
call links to its trace; the page stays inside a 420-px-wide window. Screenshots go to
`tests/artifacts/` (one is kept in `docs/`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from bot.agent.ledger import LedgerEntry
from bot.agent.ledger_file import LedgerWriter
from bot.agent.ledger_read import read_entries
from bot.agent.trace_reader import read_trace
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

pytestmark = pytest.mark.slow


async def test_a_call_from_the_chat_page_to_its_trace(
    browser: Any,  # noqa: F811
    open_site: str,  # noqa: F811
    data_copy: DemoData,  # noqa: F811
) -> None:
    from selenium.webdriver.common.by import By

    await blocking(lambda: browser.get(f"{open_site}/chats/{data_copy.group_chat}"))
    link = await blocking(lambda: wait_for(browser, "#turns a.call"))
    call_id = link.get_attribute("href").rsplit("/", 1)[1]
    await blocking(link.click)
    await blocking(lambda: wait_for(browser, "#request .msg"))
    trace = read_trace(data_copy.data_dir / "agent-traces", call_id)
    assert trace is not None
    roles = [e.get_attribute("data-role") for e in browser.find_elements(By.CSS_SELECTOR, ".msg")]
    assert roles == [m["role"] for m in trace["request"]["messages"]]
    shown = [e.text for e in browser.find_elements(By.CSS_SELECTOR, ".msg pre.preview")]
    assert trace["request"]["messages"][-1]["content"].strip()[:60] in "\n".join(shown)
    entry = next(
        e for e in read_entries(data_copy.data_dir / "agent-traces") if e.call_id == call_id
    )
    figures = browser.find_element(By.CSS_SELECTOR, "#figures").text
    assert f"{entry.input_tokens:,}" in figures
    assert f"{entry.latency_ms:,} ms" in figures
    screenshot(browser, "trace-page")

    # at 420 px the page does not scroll sideways: long text wraps or scrolls in its card
    browser.set_window_size(420, 900)
    width = await blocking(
        lambda: browser.execute_script("return document.documentElement.scrollWidth")
    )
    inner = await blocking(lambda: browser.execute_script("return window.innerWidth"))
    path = ARTIFACTS / "trace-page-420px.png"
    browser.save_screenshot(str(path))
    browser.set_window_size(1280, 900)
    assert width <= inner, f"the page is {width} px wide in a {inner}-px window"


async def test_a_live_model_call_links_to_its_trace(
    browser: Any,  # noqa: F811
    open_site: str,  # noqa: F811
    data_copy: DemoData,  # noqa: F811
) -> None:
    await blocking(lambda: browser.get(open_site + "/"))
    await blocking(lambda: wait_for(browser, "#live-status", text="connected"))
    LedgerWriter(data_copy.data_dir / "agent-traces", UTC).append(
        LedgerEntry(
            ts=datetime.now(UTC),
            session=1,
            chat=data_copy.group_chat,
            scene="group",
            turn_id="live-turn",
            provider="default",
            model="live-model",
            input_tokens=10,
            output_tokens=2,
            call_id="20260101-00000000abcd",
        )
    )
    link = await blocking(
        lambda: wait_for(browser, '#live-rows tr[data-kind="model_call"]:not([data-recent]) a')
    )
    assert link.get_attribute("href").endswith("/calls/20260101-00000000abcd")


async def test_every_page_fits_a_420_px_window(
    browser: Any,  # noqa: F811
    open_site: str,  # noqa: F811
    data_copy: DemoData,  # noqa: F811
) -> None:
    """Tables scroll inside their cards; the page itself never scrolls sideways."""
    browser.set_window_size(420, 900)
    script = browser.execute_script
    try:
        for name, path in (
            ("overview", "/"),
            ("chats", "/chats"),
            ("chat", f"/chats/{data_copy.group_chat}"),
            ("conversation", f"/chats/{data_copy.group_chat}/conversation"),
            ("errors", "/errors"),
        ):
            await blocking(lambda p=path: browser.get(open_site + p))  # type: ignore[misc]
            await blocking(lambda: wait_for(browser, "main"))
            width = await blocking(lambda: script("return document.documentElement.scrollWidth"))
            inner = await blocking(lambda: script("return window.innerWidth"))
            browser.save_screenshot(str(ARTIFACTS / f"{name}-420px.png"))
            assert width <= inner, f"{path} is {width} px wide in a {inner}-px window"
    finally:
        browser.set_window_size(1280, 900)

"""The dashboard in a real browser: Debian's chromium, headless, driven by selenium through the
system chromedriver (nothing is downloaded). Screenshots go to `tests/artifacts/`.

Outside CI the test skips when no chromium is installed; in CI (`CI` set) it fails instead.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from aiohttp import web
from pydantic import SecretStr

from bot.agent.ledger import LedgerEntry
from bot.agent.ledger_file import LedgerWriter
from bot.agent.ledger_read import read_entries
from bot.app.dashboard.server import close_dashboard, open_dashboard, start_dashboard
from tests.test_app.test_dashboard.conftest import (
    DASHBOARD_SECRET,
    HOSTILE_TEXT,
    ROOT,
    DemoData,
    run_tgbot,
)
from tests.test_app.test_dashboard.test_pages import report_json

pytestmark = pytest.mark.slow

ARTIFACTS = ROOT / "tests" / "artifacts"
SPLIT = re.compile(
    r"tokens: fixed \d+ \(system \+ tool schemas\), history \d+, current \d+, total \d+"
)
T = TypeVar("T")


def _find_browser() -> tuple[str, str] | None:
    browser = next(
        (
            found
            for name in ("chromium", "chromium-browser", "google-chrome")
            if (found := shutil.which(name))
        ),
        None,
    )
    driver = shutil.which("chromedriver") or (
        "/usr/bin/chromedriver" if Path("/usr/bin/chromedriver").exists() else None
    )
    return (browser, driver) if browser and driver else None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    found = _find_browser()
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("CI must install chromium and chromium-driver (see .ci/run)")
        pytest.skip("no chromium + chromedriver found (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    binary, driver_path = found
    options = Options()
    options.binary_location = binary
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,900",
        "--lang=en-US",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.set_page_load_timeout(30)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        yield driver
    finally:
        driver.quit()


async def blocking(fn: Callable[[], T]) -> T:
    """Selenium blocks; the server under test runs on this event loop meanwhile."""
    return await asyncio.to_thread(fn)


def screenshot(driver: Any, name: str) -> Path:
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, min(max(int(height) + 160, 700), 4000))
    path = ARTIFACTS / f"{name}.png"
    driver.save_screenshot(str(path))
    driver.set_window_size(1280, 900)
    return path


def wait_for(driver: Any, css: str, *, text: str | None = None, seconds: float = 15) -> Any:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(driver, seconds)
    if text is not None:
        wait.until(expected_conditions.text_to_be_present_in_element((By.CSS_SELECTOR, css), text))
    return wait.until(expected_conditions.presence_of_element_located((By.CSS_SELECTOR, css)))


@pytest.fixture
def data_copy(demo_data: DemoData, tmp_path: Path) -> DemoData:
    """The demo's data dir copied, so the live event written here changes no other test."""
    target = tmp_path / "data"
    shutil.copytree(demo_data.data_dir, target)
    return DemoData(data_dir=target, group_chat=demo_data.group_chat)


async def serve(data: DemoData, **overrides: Any) -> AsyncIterator[str]:
    board = open_dashboard(data.settings(**overrides))
    runner: web.AppRunner | None = None
    try:
        runner = await start_dashboard(board, host="127.0.0.1", port=0)
        host, port = runner.addresses[0][:2]
        yield f"http://{host}:{port}"
    finally:
        await close_dashboard(board, runner)


@pytest.fixture
async def open_site(data_copy: DemoData) -> AsyncIterator[str]:
    async for base in serve(data_copy):
        yield base


@pytest.fixture
async def guarded_site(data_copy: DemoData) -> AsyncIterator[str]:
    async for base in serve(data_copy, dashboard_token=SecretStr(DASHBOARD_SECRET)):
        yield base


async def test_every_page_in_a_browser(browser: Any, open_site: str, data_copy: DemoData) -> None:
    from selenium.webdriver.common.by import By

    report = report_json(data_copy, 14)
    context = run_tgbot("context", "show", "--chat", str(data_copy.group_chat), env=data_copy.env())
    assert context.returncode == 0, context.stderr

    # Overview: the totals a person reads first, the same as the usage report's
    await blocking(lambda: browser.get(open_site + "/"))
    await blocking(lambda: wait_for(browser, "#live-status", text="connected"))
    calls = await blocking(lambda: browser.find_element(By.CSS_SELECTOR, '[data-total="calls"]'))
    assert calls.text == f"{report['total']['calls']:,}"
    for day in report["days"]:
        if day["calls"]:
            cell = browser.find_element(
                By.CSS_SELECTOR, f'tr[data-day="{day["day"]}"] [data-field="calls"]'
            )
            assert cell.text == f"{day['calls']:,}"
    # the demo's long group conversation made summary calls: the compactions card
    assert report["total"]["compaction_calls"] > 0
    compactions = browser.find_element(By.CSS_SELECTOR, '[data-total="compaction_calls"]')
    assert compactions.text == f"{report['total']['compaction_calls']:,}"
    charts = browser.find_elements(By.CSS_SELECTOR, "svg.chart")
    assert len(charts) >= 4
    assert all(chart.size["width"] > 300 for chart in charts)

    # One live event: a model call written to the ledger shows up without a reload
    traces = data_copy.data_dir / "agent-traces"
    # the newest (a demo run in the small hours stamps its calls ahead of the wall clock)
    live_at = max(datetime.now(UTC), *(e.ts for e in read_entries(traces))) + timedelta(seconds=1)
    LedgerWriter(traces, UTC).append(
        LedgerEntry(
            ts=live_at,
            session=1,
            chat=data_copy.group_chat,
            scene="group",
            turn_id="live-turn",
            provider="default",
            model="live-model",
            input_tokens=4321,
            cached_tokens=4000,
            output_tokens=12,
            latency_ms=640,
        )
    )
    row = await blocking(
        lambda: wait_for(browser, '#live-rows tr[data-kind="model_call"]:not([data-recent])')
    )
    assert "live-model" in row.text
    assert "4321" in row.text
    # ... and a summary call is announced as a compaction
    LedgerWriter(traces, UTC).append(
        LedgerEntry(
            ts=live_at + timedelta(seconds=1),
            session=1,
            chat=data_copy.group_chat,
            scene="group",
            turn_id="live-turn",
            iteration=0,
            purpose="compaction",
            provider="default",
            model="fold-model",
            input_tokens=2500,
            output_tokens=180,
            latency_ms=900,
        )
    )
    row = await blocking(
        lambda: wait_for(browser, '#live-rows tr[data-kind="compaction"]:not([data-recent])')
    )
    assert "fold-model" in row.text
    assert "summary call" in row.text
    await blocking(lambda: screenshot(browser, "overview"))

    # Chats: every chat with its window meter
    await blocking(lambda: browser.get(open_site + "/chats"))
    link = await blocking(
        lambda: browser.find_element(By.CSS_SELECTOR, f'tr[data-chat="{data_copy.group_chat}"] a')
    )
    assert browser.find_elements(By.CSS_SELECTOR, "meter")
    await blocking(lambda: screenshot(browser, "chats"))
    await blocking(link.click)

    # One chat: the header lines of `context show`, the token split, and member text as text
    preview = await blocking(lambda: wait_for(browser, "#preview"))
    shown = preview.get_attribute("textContent")
    expected = context.stdout.rstrip("\n").split("\n")
    lines = shown.split("\n")
    assert lines[0] == expected[0]
    assert lines[0].startswith("--- [0] system (")
    headers = [line for line in lines if line.startswith("--- [")]
    assert headers == [line for line in expected if line.startswith("--- [")]
    assert SPLIT.fullmatch(lines[-1])
    assert lines[-1] == expected[-1]
    assert HOSTILE_TEXT in shown  # shown as text ...
    scripts = browser.execute_script(
        "return Array.from(document.scripts, s => s.getAttribute('src'))"
    )
    assert scripts == ["/static/live.js"]  # ... never run: the only script is ours
    assert HOSTILE_TEXT.split(" is")[0] in browser.find_element(By.ID, "aliases").text
    folds = browser.find_elements(By.CSS_SELECTOR, '#trims li[data-kind="compaction"]')
    assert folds
    assert "summary call" in folds[0].text
    assert "2,500 in" in folds[0].text  # the live one above, the newest
    assert browser.find_elements(By.CSS_SELECTOR, '#turns tr[data-purpose="compaction"]')
    await blocking(lambda: screenshot(browser, "chat"))


async def test_the_token_refusal_and_the_cookie_in_a_browser(
    browser: Any, guarded_site: str
) -> None:
    from selenium.webdriver.common.by import By

    await blocking(lambda: browser.delete_all_cookies())
    await blocking(lambda: browser.get(guarded_site + "/chats"))
    body = browser.find_element(By.TAG_NAME, "body").text
    assert "This dashboard needs its token" in body
    assert DASHBOARD_SECRET not in browser.page_source
    await blocking(lambda: screenshot(browser, "refused"))

    await blocking(lambda: browser.get(f"{guarded_site}/chats?token={DASHBOARD_SECRET}"))
    await blocking(lambda: wait_for(browser, "#chats"))
    assert browser.current_url == guarded_site + "/chats"  # the token left the address bar
    cookies = browser.get_cookies()
    assert len(cookies) == 1
    assert cookies[0]["httpOnly"] is True
    assert DASHBOARD_SECRET not in cookies[0]["value"]
    await blocking(lambda: browser.get(guarded_site + "/"))
    await blocking(lambda: wait_for(browser, "#live-status", text="connected"))

"""Screenshots of every dashboard page at 1366 and 420 px, on the demo's data, into docs/.

    .venv/bin/python scripts/dashboard_screenshots.py [--out docs] [--zone Asia/Shanghai]

Runs `tgbot demo` into a temporary directory, serves `tgbot dashboard` on it, and drives
Debian's chromium headless (`apt-get install chromium chromium-driver`) through selenium
(the `test` extra). Each page is captured whole (the window is as tall as the page, capped).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WIDTHS = (1366, 420)
MAX_HEIGHT = 6000


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait(url: str, seconds: float = 60) -> None:
    give_up = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            if time.monotonic() > give_up:
                raise
            time.sleep(0.3)


def _pages(data: Path) -> list[tuple[str, str]]:
    ledger = sorted((data / "agent-traces").glob("*.jsonl"))[-1]
    lines = [json.loads(line) for line in ledger.read_text().splitlines() if line.strip()]
    group = next(line["chat"] for line in lines if line["chat"] < 0)
    call = next(
        line["call_id"]
        for line in reversed(lines)
        if line["chat"] == group and line.get("purpose", "turn") == "turn" and line.get("call_id")
    )
    return [
        ("overview", "/"),
        ("chats", "/chats"),
        ("chat", f"/chats/{group}"),
        ("conversation", f"/chats/{group}/conversation?q=CSV"),
        ("trace", f"/calls/{call}"),
        ("errors", "/errors"),
        ("jobs", "/jobs"),
        ("ambient", "/ambient"),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs"))
    parser.add_argument("--zone", default="Asia/Shanghai", help="BOT_TIMEZONE of the pages")
    args = parser.parse_args()
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tgbot = str(Path(sys.executable).parent / "tgbot")
    with tempfile.TemporaryDirectory(prefix="tgbot-shots-") as temporary:
        data = Path(temporary) / "demo"
        env = {**os.environ, "BOT_TIMEZONE": args.zone, "DATA_DIR": str(data)}
        subprocess.run([tgbot, "demo", "--data-dir", str(data)], env=env, check=True,
                       stdout=subprocess.DEVNULL)  # fmt: skip
        port = _free_port()
        server = subprocess.Popen(
            [tgbot, "dashboard", "--port", str(port)], env=env, stdout=subprocess.DEVNULL
        )
        options = Options()
        options.binary_location = "/usr/bin/chromium"
        for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--disable-gpu", "--hide-scrollbars", "--lang=en-US"):  # fmt: skip
            options.add_argument(flag)
        driver = webdriver.Chrome(
            service=Service(executable_path="/usr/bin/chromedriver"), options=options
        )
        try:
            site = f"http://127.0.0.1:{port}"
            _wait(site + "/healthz")
            for name, path in _pages(data):
                for width in WIDTHS:
                    driver.set_window_size(width, 900)
                    driver.get(site + path)
                    time.sleep(1.0)  # the live panel fills from the page, then connects
                    height = driver.execute_script("return document.documentElement.scrollHeight")
                    driver.set_window_size(width, min(int(height), MAX_HEIGHT))
                    target = out / f"dashboard-{name}-{width}.png"
                    driver.save_screenshot(str(target))
                    print(target)
        finally:
            driver.quit()
            server.terminate()
            server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())

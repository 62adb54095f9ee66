"""Per-route token corrections: learned from calls, persisted in DATA_DIR, kept across a restart."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Mapping
from pathlib import Path

import pytest

from bot.agent.metering import TokenTruth, route_key
from bot.agent.token_corrections_file import FILE_NAME
from bot.context.tokens import TokenCorrection
from tests.deadlines import EVENT, deadline


def _calls(truth: TokenTruth, *, ratio: float, count: int, route: str = "deepseek") -> None:
    for n in range(count):
        estimated = 6_000 + 97 * n
        truth.observe(
            route, "deepseek-chat", estimated=estimated, reported=round(estimated * ratio)
        )


def test_a_route_learns_and_the_book_survives_a_restart(tmp_path: Path) -> None:
    truth = TokenTruth.load(tmp_path)
    _calls(truth, ratio=0.82, count=25)
    learned = truth.correction("deepseek", "deepseek-chat")
    assert learned.samples == 25
    assert learned.ratio == pytest.approx(0.82, rel=0.02)
    truth.flush()  # the bot shuts down

    restarted = TokenTruth.load(tmp_path)  # a new process reads the same data dir
    again = restarted.correction("deepseek", "deepseek-chat")
    assert again.samples == 25
    assert again.ratio == pytest.approx(learned.ratio, rel=1e-6)
    assert again.apply(10_000) == learned.apply(10_000)
    # and it goes on learning from where it was
    _calls(restarted, ratio=0.82, count=1)  # its first change is written at once
    assert TokenTruth.load(tmp_path).correction("deepseek", "deepseek-chat").samples == 26


def test_routes_are_kept_apart(tmp_path: Path) -> None:
    truth = TokenTruth.load(tmp_path)
    _calls(truth, ratio=0.7, count=20, route="qwen")
    _calls(truth, ratio=1.2, count=20, route="openai")
    assert (
        truth.correction("qwen", "deepseek-chat").ratio
        < 1
        < truth.correction("openai", "deepseek-chat").ratio
    )
    assert truth.correction("other", "model").samples == 0
    truth.flush()
    assert set(TokenTruth.load(tmp_path).routes) == {
        route_key("qwen", "deepseek-chat"),
        route_key("openai", "deepseek-chat"),
    }


def test_a_call_without_a_reported_count_writes_nothing(tmp_path: Path) -> None:
    truth = TokenTruth.load(tmp_path)
    truth.observe("p", "m", estimated=5_000, reported=None)
    assert not (tmp_path / FILE_NAME).exists()


@pytest.mark.parametrize(
    "content", ["{not json", "[]", '{"routes": 3}'], ids=["broken", "a list", "no routes"]
)
def test_an_unreadable_file_starts_fresh(tmp_path: Path, content: str) -> None:
    (tmp_path / FILE_NAME).write_text(content)
    truth = TokenTruth.load(tmp_path)
    assert truth.routes == {}
    _calls(truth, ratio=0.9, count=3)
    truth.flush()
    saved = json.loads((tmp_path / FILE_NAME).read_text())
    assert saved["version"] == 1
    assert saved["routes"][route_key("deepseek", "deepseek-chat")]["samples"] == 3
    assert not list(tmp_path.glob(".*.tmp")), "the temporary file is renamed into place"


def test_a_busy_route_writes_the_book_at_most_once_an_interval(tmp_path: Path) -> None:
    """Many calls a second rewrite the file once per interval, not once per call; what is
    pending is written at shutdown, and a crash loses at most one interval of learning."""
    now = [100.0]
    truth = TokenTruth(tmp_path / FILE_NAME, save_interval=5.0, monotonic=lambda: now[0])

    def saved_samples() -> int:
        book = json.loads((tmp_path / FILE_NAME).read_text())
        return int(book["routes"][route_key("deepseek", "deepseek-chat")]["samples"])

    _calls(truth, ratio=0.8, count=1)
    assert saved_samples() == 1, "the first change is written at once"
    _calls(truth, ratio=0.8, count=30)
    assert saved_samples() == 1, "within the interval nothing more is written"
    now[0] += 5.0
    _calls(truth, ratio=0.8, count=1)
    assert saved_samples() == 32
    _calls(truth, ratio=0.8, count=4)
    crashed = TokenTruth.load(tmp_path)  # a process killed now restarts from the last write
    assert crashed.correction("deepseek", "deepseek-chat").samples == 32
    truth.flush()
    assert saved_samples() == 36


class SharedBook:
    """The shared table of `storage.token_corrections` in memory: one row per worker."""

    def __init__(self, others: dict[str, TokenCorrection] | None = None) -> None:
        self.rows: dict[tuple[str, str], TokenCorrection] = {
            (route, "other"): state for route, state in (others or {}).items()
        }
        self.changed = asyncio.Event()

    def merged(self) -> dict[str, TokenCorrection]:
        routes: dict[str, list[TokenCorrection]] = {}
        for (route, _), state in self.rows.items():
            routes.setdefault(route, []).append(state)
        out = {}
        for route, states in routes.items():
            samples = sum(s.samples for s in states)
            mean = sum(s.samples * math.log(s.ratio) for s in states) / samples
            out[route] = TokenCorrection(ratio=math.exp(mean), samples=samples)
        return out

    async def load(self) -> dict[str, TokenCorrection]:
        return self.merged()

    async def publish(self, own: Mapping[str, TokenCorrection]) -> dict[str, TokenCorrection]:
        for route, state in own.items():
            self.rows[(route, "me")] = state
        self.changed.set()
        return self.merged()


async def test_the_last_calls_reach_the_shared_book_without_another_call() -> None:
    book = SharedBook()
    truth = TokenTruth(save_interval=0.05, shared=book)
    _calls(truth, ratio=0.82, count=3)  # the first is shared at once, the rest later
    key = route_key("deepseek", "deepseek-chat")
    async with asyncio.timeout(deadline(EVENT)):
        while book.rows.get((key, "me"), TokenCorrection()).samples < 3:
            book.changed.clear()
            await book.changed.wait()
    assert book.rows[(key, "me")].ratio == pytest.approx(
        truth.correction("deepseek", "deepseek-chat").ratio
    )


async def test_a_worker_adopts_what_every_worker_learned() -> None:
    key = route_key("deepseek", "deepseek-chat")
    book = SharedBook({key: TokenCorrection(ratio=0.6, samples=30)})
    truth = TokenTruth(shared=book)
    await truth.load_shared()  # at start-up
    assert truth.correction("deepseek", "deepseek-chat") == TokenCorrection(ratio=0.6, samples=30)
    _calls(truth, ratio=0.9, count=4)
    await truth.flush_shared()  # at shutdown
    mine = book.rows[(key, "me")]
    assert mine.samples == 4  # its own calls, counted once in the shared state
    shared = truth.correction("deepseek", "deepseek-chat")
    assert shared.samples == 34
    assert 0.6 < shared.ratio < mine.ratio  # the others' 30 calls weigh more than its 4

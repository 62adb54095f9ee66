"""History search (`search_history`, `storage.search`) on SQLite: latency, size, inserts, recall.

Run: `.venv/bin/python -m bench.bench_search [--sizes 100000,1000000] [--queries 400]`.

- latency: `SqlStore.search_messages` (the tool's path: FTS5 match, rows, re-rank) for the
  50 labelled queries alternating with broad ones (`BROAD`: words many lines hold),
  p50/p99 over `--queries` calls, with N stored messages in 10 chats of which the searched
  one holds half (the worst case is one big chat). The rows are bulk-inserted with sqlite3
  (events and index entries, built by `storage.search`'s own tokenizer) so that 1M
  messages take minutes, not an hour of `tgbot run`.
- index size per message: the FTS5 table and its shadow tables (`dbstat`), over N.
- inserts with the index on: `record_platform_messages` in batches of 100 (what one
  `getUpdates` batch writes), messages/s. The ingest bench (`bench.bench_ingest`, a real
  `tgbot run`) measures the same path end to end.
- recall@5 on `bench/texts/recall_set.json` (50 facts and questions, 25 English, 25
  Chinese, the query a model would type), the facts buried among 20,000 filler messages of
  the same chat, for three schemes: ours (CJK bigrams + words, `storage.search`), FTS5
  `trigram` on the raw text matching the query's words (a word under 3 characters cannot
  match a trigram index), and trigram with a `LIKE` scan for those short words.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.domain.platform_messages import PlatformMessage
from storage.engine import create_engine_for
from storage.migrate import upgrade_database
from storage.search import index_tokens, scope_token
from storage.sql import SqlStore

TEXTS = Path(__file__).with_name("texts")
RECALL_SET = TEXTS / "recall_set.json"
CHAT = -1001000000000
T0 = datetime(2025, 1, 1, tzinfo=UTC)
CHATS = 10
FILLER_FOR_RECALL = 20_000
LATENCY_TARGET_MS = 50.0
BROAD = (
    "the build is failing",
    "部署 测试",
    "meeting notes today",
    "今天 会议",
    "error timeout",
    "我觉得 问题",
    "can you check",
    "数据库",
)
"""Queries that match many filler lines, timed alongside the labelled ones."""


@dataclass(frozen=True, slots=True)
class SizeResult:
    messages: int
    build_s: float
    p50_ms: float
    p99_ms: float
    index_bytes_per_message: float


@dataclass(frozen=True, slots=True)
class SearchResult:
    sizes: tuple[SizeResult, ...]
    inserts_per_second: float
    recall: dict[str, dict[str, float]]
    """scheme → {"en": recall@5, "zh": …, "all": …}"""

    @property
    def largest(self) -> SizeResult:
        return max(self.sizes, key=lambda s: s.messages)

    def markdown(self) -> str:
        lines = [
            "| stored messages | build (bulk) | search p50 | search p99 | index bytes/message |",
            "|---:|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {s.messages:,} | {s.build_s:.0f} s | {s.p50_ms:.1f} ms | {s.p99_ms:.1f} ms | "
            f"{s.index_bytes_per_message:.0f} |"
            for s in self.sizes
        ]
        lines += [
            "",
            f"Inserts with the index on (`record_platform_messages`, batches of 100): "
            f"{self.inserts_per_second:,.0f} msgs/s.",
            "",
            "| recall@5 (50 labelled questions) | English | Chinese | all |",
            "|---|---:|---:|---:|",
        ]
        lines += [
            f"| {scheme} | {r['en']:.0%} | {r['zh']:.0%} | {r['all']:.0%} |"
            for scheme, r in self.recall.items()
        ]
        return "\n".join(lines)


def _filler_texts() -> list[str]:
    blocks: list[str] = []
    for name in ("en.txt", "zh.txt", "mixed_chat.txt", "code.txt", "emoji.txt"):
        text = (TEXTS / name).read_text(encoding="utf-8")
        blocks += [b.strip() for b in text.split("\n---\n") if b.strip()]
    return blocks


def _fillers(count: int, rng: random.Random) -> list[str]:
    """Varied chat lines: a sample, cut at a random place, with a number of its own."""
    base = _filler_texts()
    out = []
    for n in range(count):
        text = rng.choice(base)
        cut = rng.randint(20, max(21, min(len(text), 240)))
        out.append(f"{text[:cut]} #{n % 997}")
    return out


def _bulk_insert(path: Path, texts: Sequence[tuple[int, str]], *, first_id: int = 1) -> None:
    """Events (chat, text) and their index entries, straight into the migrated file."""
    db = sqlite3.connect(path)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=OFF")
        events = []
        entries = []
        for offset, (chat, body) in enumerate(texts):
            row_id = first_id + offset
            date = (T0 + timedelta(seconds=row_id)).strftime("%Y-%m-%d %H:%M:%S.%f")
            events.append(
                (row_id, chat, row_id, 0, 1000 + row_id % 50, f"m{row_id % 50}", date, body)
            )
            tokens = index_tokens(body)
            if tokens:
                entries.append((row_id, scope_token(chat, 0), " ".join(tokens)))
        db.executemany(
            "INSERT INTO platform_events (id, chat_id, message_id, thread_id, sender_id, "
            "sender_name, is_bot, date, text, media) VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?, '[]')",
            events,
        )
        db.executemany("INSERT INTO message_search(rowid, scope, body) VALUES (?, ?, ?)", entries)
        db.commit()
    finally:
        db.close()


def _index_bytes(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        return int(
            db.execute(
                "SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name LIKE 'message_search%'"
            ).fetchone()[0]
        )
    finally:
        db.close()


async def _fresh_database(directory: Path) -> tuple[Path, str]:
    path = directory / "search.sqlite3"
    url = f"sqlite+aiosqlite:///{path}"
    await upgrade_database(url)
    return path, url


def _labelled() -> list[str]:
    return [
        str(q["query"]) for q in json.loads(RECALL_SET.read_text(encoding="utf-8"))["questions"]
    ]


async def measure_size(size: int, repeats: int, rng: random.Random) -> SizeResult:
    with tempfile.TemporaryDirectory() as tmp:
        path, url = await _fresh_database(Path(tmp))
        texts = _fillers(size, rng)
        chats = [CHAT if n % 2 == 0 else CHAT - 1 - n % (CHATS - 1) for n in range(size)]
        started = time.perf_counter()
        for begin in range(0, size, 50_000):
            chunk = list(
                zip(chats[begin : begin + 50_000], texts[begin : begin + 50_000], strict=True)
            )
            _bulk_insert(path, chunk, first_id=begin + 1)
        build = time.perf_counter() - started
        store = SqlStore(create_engine_for(url))
        queries = [q for pair in zip(_labelled(), BROAD * 7, strict=False) for q in pair]
        timings = []
        try:
            for query in queries[:5]:  # warm the page cache
                await store.search_messages(CHAT, 0, query, limit=5)
            for n in range(repeats):
                began = time.perf_counter()
                await store.search_messages(CHAT, 0, queries[n % len(queries)], limit=5)
                timings.append((time.perf_counter() - began) * 1000)
        finally:
            await store.close()
        timings.sort()
        return SizeResult(
            messages=size,
            build_s=build,
            p50_ms=statistics.median(timings),
            p99_ms=timings[min(len(timings) - 1, int(len(timings) * 0.99))],
            index_bytes_per_message=_index_bytes(path) / size,
        )


async def measure_inserts(batches: int = 30) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        _path, url = await _fresh_database(Path(tmp))
        store = SqlStore(create_engine_for(url))
        texts = _fillers(batches * 100, random.Random(5))
        try:
            started = time.perf_counter()
            for b in range(batches):
                await store.record_platform_messages(
                    [
                        PlatformMessage(
                            chat_id=CHAT,
                            message_id=b * 100 + i + 1,
                            sender_id=1001,
                            sender_name="Alice",
                            date=T0 + timedelta(seconds=b * 100 + i),
                            text=texts[b * 100 + i],
                        )
                        for i in range(100)
                    ]
                )
            return batches * 100 / (time.perf_counter() - started)
        finally:
            await store.close()


def _trigram_search(db: sqlite3.Connection, query: str, *, like: bool) -> list[int]:
    """The trigram scheme: the query's words (split as `storage.search` splits words, CJK
    runs kept whole) matched as substrings; most words matched first, then newest."""
    words = _words(query)
    long_words = [w for w in words if len(w) >= 3]
    short_words = [w for w in words if len(w) < 3]
    hits: dict[int, int] = {}
    if long_words:
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in long_words)
        for (rowid,) in db.execute(
            "SELECT rowid FROM tri WHERE tri MATCH ? ORDER BY rank LIMIT 200", (match,)
        ):
            hits[rowid] = 0
    if like and short_words:
        clause = " OR ".join("body LIKE ?" for _ in short_words)
        params = [f"%{w}%" for w in short_words]
        for (rowid,) in db.execute(
            f"SELECT rowid FROM tri WHERE {clause} ORDER BY rowid DESC LIMIT 200", params
        ):
            hits[rowid] = 0
    marks = ",".join("?" * len(hits))
    sql = f"SELECT rowid, body FROM tri WHERE rowid IN ({marks})"
    bodies: dict[int, str] = dict(db.execute(sql, list(hits))) if hits else {}
    counted = []
    for rowid, body in bodies.items():
        lowered = body.lower()
        score = sum(1 for w in (words if like else long_words) if w.lower() in lowered)
        counted.append((score, rowid))
    counted.sort(reverse=True)
    return [rowid for score, rowid in counted if score][:5]


def _words(query: str) -> list[str]:
    """Query words for the trigram scheme: runs of letters/digits, CJK runs kept whole."""
    words: list[str] = []
    current = ""
    for ch in query:
        if ch.isalnum():
            current += ch
        elif current:
            words.append(current)
            current = ""
    if current:
        words.append(current)
    return words


async def measure_recall() -> dict[str, dict[str, float]]:
    data = json.loads(RECALL_SET.read_text(encoding="utf-8"))
    facts = {int(f["id"]): str(f["text"]) for f in data["facts"]}
    questions = data["questions"]
    rng = random.Random(11)
    fillers = _fillers(FILLER_FOR_RECALL, rng)
    # the facts sit among the fillers, spread over the chat's history
    slots = sorted(rng.sample(range(FILLER_FOR_RECALL + len(facts)), len(facts)))
    rows: list[str] = []
    fact_row: dict[int, int] = {}
    fact_ids = sorted(facts)
    filler = iter(fillers)
    for position in range(FILLER_FOR_RECALL + len(facts)):
        if slots and position == slots[0]:
            slots.pop(0)
            fid = fact_ids[len(fact_row)]
            fact_row[fid] = position + 1
            rows.append(facts[fid])
        else:
            rows.append(next(filler))
    found: dict[str, dict[str, list[bool]]] = {
        "ours (CJK bigrams + words)": {"en": [], "zh": []},
        "trigram (FTS5 MATCH only)": {"en": [], "zh": []},
        "trigram + LIKE for words under 3 characters": {"en": [], "zh": []},
    }
    with tempfile.TemporaryDirectory() as tmp:
        path, url = await _fresh_database(Path(tmp))
        _bulk_insert(path, [(CHAT, body) for body in rows])
        tri = sqlite3.connect(Path(tmp) / "tri.sqlite3")
        tri.execute("CREATE VIRTUAL TABLE tri USING fts5(body, tokenize='trigram')")
        tri.executemany(
            "INSERT INTO tri(rowid, body) VALUES (?, ?)", list(enumerate(rows, start=1))
        )
        tri.commit()
        store = SqlStore(create_engine_for(url))
        try:
            for question in questions:
                expect = fact_row[int(question["expect"])]
                lang = "zh" if int(question["expect"]) > 25 else "en"
                query = str(question["query"])
                hits = await store.search_messages(CHAT, 0, query, limit=5)
                found["ours (CJK bigrams + words)"][lang].append(
                    expect in [h.message_id for h in hits]
                )
                found["trigram (FTS5 MATCH only)"][lang].append(
                    expect in _trigram_search(tri, query, like=False)
                )
                found["trigram + LIKE for words under 3 characters"][lang].append(
                    expect in _trigram_search(tri, query, like=True)
                )
        finally:
            await store.close()
            tri.close()
    return {
        scheme: {
            "en": sum(by["en"]) / len(by["en"]),
            "zh": sum(by["zh"]) / len(by["zh"]),
            "all": (sum(by["en"]) + sum(by["zh"])) / (len(by["en"]) + len(by["zh"])),
        }
        for scheme, by in found.items()
    }


def run(sizes: Sequence[int] = (100_000,), queries: int = 400, seed: int = 7) -> SearchResult:
    async def main() -> SearchResult:
        rng = random.Random(seed)
        measured = [await measure_size(size, queries, rng) for size in sizes]
        return SearchResult(
            sizes=tuple(measured),
            inserts_per_second=await measure_inserts(),
            recall=await measure_recall(),
        )

    return asyncio.run(main())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_search", description=__doc__)
    parser.add_argument("--sizes", default="100000,1000000", help="stored messages")
    parser.add_argument("--queries", type=int, default=400, help="timed searches per size")
    args = parser.parse_args(argv)
    sizes = tuple(int(s) for s in args.sizes.split(","))
    result = run(sizes, args.queries)
    print(result.markdown())
    print(
        f"\np99 at {result.largest.messages:,}: {result.largest.p99_ms:.1f} ms "
        f"(target ≤ {LATENCY_TARGET_MS:.0f} ms at 1,000,000)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

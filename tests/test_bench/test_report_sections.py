"""`python -m bench` rewrites REPORT.md but keeps the section that is run by hand."""

from __future__ import annotations

from pathlib import Path

from bench.__main__ import WORKERS_SECTION, kept_section


def test_the_hand_run_section_is_kept_whole_and_nothing_after_it(tmp_path: Path) -> None:
    report = tmp_path / "REPORT.md"
    report.write_text(
        "## 5. Ingest\n\nold rows\n\n"
        "## 5b. Answered load through webhook workers\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n\n"
        "## Storage\n\nstorage rows\n",
        encoding="utf-8",
    )
    assert kept_section(report, WORKERS_SECTION) == [
        "## 5b. Answered load through webhook workers",
        "",
        "| a | b |",
        "|---|---|",
        "| 1 | 2 |",
        "",
    ]


def test_a_report_without_the_section_or_no_report_keeps_nothing(tmp_path: Path) -> None:
    assert kept_section(tmp_path / "missing.md", WORKERS_SECTION) == []
    report = tmp_path / "REPORT.md"
    report.write_text("## 5. Ingest\n\nrows\n", encoding="utf-8")
    assert kept_section(report, WORKERS_SECTION) == []


def test_the_checked_in_report_has_the_workers_section() -> None:
    report = Path(__file__).resolve().parents[2] / "bench" / "REPORT.md"
    kept = kept_section(report, WORKERS_SECTION)
    assert kept[0].startswith("## 5b. Answered load through webhook workers")
    assert any(line.startswith("| PostgreSQL | 2 |") for line in kept)

"""The token corrections' file: a round trip, and a missing or broken file read as no routes."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.agent.token_corrections_file import FILE_NAME, read_corrections, write_corrections
from bot.context.tokens import TokenCorrection


def test_what_is_written_is_read_back(tmp_path: Path) -> None:
    path = tmp_path / "data" / FILE_NAME  # the folder is made on the first write
    routes = {"deepseek/deepseek-chat": TokenCorrection(ratio=0.83, samples=57)}
    write_corrections(path, routes)
    assert read_corrections(path) == routes
    assert not [p for p in path.parent.iterdir() if p.name != FILE_NAME]  # no temporary left


@pytest.mark.parametrize(
    "content",
    [None, "not json", "[]", '{"version": 1}'],
    ids=["missing", "unreadable", "not an object", "no routes"],
)
def test_a_missing_or_broken_file_has_no_routes(tmp_path: Path, content: str | None) -> None:
    path = tmp_path / FILE_NAME
    if content is not None:
        path.write_text(content, encoding="utf-8")
    assert read_corrections(path) == {}

"""`table_text`: a Markdown table's cells as padded monospace rows, a rule under the header."""

from __future__ import annotations

import pytest

from adapters.telegram.markdown_tables import table_text


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ([], ""),
        ([["a", "bb"]], "a | bb"),
        ([["name", "n"], ["x", "10"]], "name | n\n-----+---\nx    | 10"),
        ([["a", "b", "c"], ["long"]], "a    | b | c\n-----+---+--\nlong"),
    ],
    ids=["no rows", "header only", "padded columns", "a short row"],
)
def test_rows_are_padded_to_their_columns(rows: list[list[str]], expected: str) -> None:
    assert table_text(rows) == expected

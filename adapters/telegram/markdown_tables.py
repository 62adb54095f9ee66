"""Markdown tables as Telegram shows them: padded monospace rows (Telegram has no tables).

`adapters.telegram.markdown_entities` reads a table's cells while rendering and writes the
whole table, laid out here (`table_text`), as one `pre` entity.
"""

from __future__ import annotations

from collections.abc import Sequence


def table_text(rows: Sequence[Sequence[str]]) -> str:
    """Telegram has no tables: rows with padded columns, shown in monospace, a rule under
    the header row."""
    columns = max((len(row) for row in rows), default=0)
    widths = [max((len(r[i]) for r in rows if i < len(r)), default=0) for i in range(columns)]
    lines = [
        " | ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows
    ]
    if len(lines) > 1:
        lines.insert(1, "-+-".join("-" * width for width in widths))
    return "\n".join(lines)

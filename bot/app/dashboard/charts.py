"""Small inline SVG charts drawn from numbers (no JavaScript, no library).

Each chart is a string of SVG markup styled by classes from the dashboard's stylesheet, with
a `<title>` on every bar or point so hovering shows the exact value. Labels are escaped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from markupsafe import Markup, escape

WIDTH = 560
HEIGHT = 170
_LEFT = 52
_RIGHT = 10
_TOP = 26
_UNIT_Y = 12
"""The y axis unit sits on its own line above the top tick label."""
_BOTTOM = 26


def _nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 × 10^k at or above `value` (axis top)."""
    if value <= 0:
        return 1.0
    magnitude = 10 ** (len(str(int(value))) - 1) if value >= 1 else 1.0
    for step in (1, 2, 2.5, 5, 10):
        if step * magnitude >= value:
            return step * magnitude
    return 10 * magnitude


def _frame(top: float, fmt: Callable[[float], str], title: str, unit: str) -> list[str]:
    plot_h = HEIGHT - _TOP - _BOTTOM
    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
    ]
    if unit:  # the y axis's unit, above its labels
        parts.append(f'<text class="axis unit" x="4" y="{_UNIT_Y}">{escape(unit)}</text>')
    for i in range(3):
        value = top * i / 2
        y = _TOP + plot_h - plot_h * i / 2
        parts.append(
            f'<line class="grid" x1="{_LEFT}" x2="{WIDTH - _RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>'
        )
        parts.append(
            f'<text class="axis" x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
            f"{escape(fmt(value))}</text>"
        )
    return parts


def _x_labels(labels: Sequence[str], slot: float) -> list[str]:
    every = max(1, len(labels) // 8)
    parts = []
    for i, label in enumerate(labels):
        if i % every and i != len(labels) - 1:
            continue
        x = _LEFT + slot * (i + 0.5)
        parts.append(
            f'<text class="axis" x="{x:.1f}" y="{HEIGHT - 8}" text-anchor="middle">'
            f"{escape(label)}</text>"
        )
    return parts


def bar_chart(
    labels: Sequence[str],
    values: Sequence[float | None],
    *,
    title: str,
    fmt: Callable[[float], str],
    unit: str = "",
) -> Markup:
    """One bar per label; `None` draws nothing (no data that day). `unit` labels the y axis."""
    top = _nice_ceiling(max((v for v in values if v is not None), default=0.0))
    plot_w = WIDTH - _LEFT - _RIGHT
    plot_h = HEIGHT - _TOP - _BOTTOM
    slot = plot_w / max(1, len(labels))
    parts = _frame(top, fmt, title, unit)
    for i, (label, value) in enumerate(zip(labels, values, strict=True)):
        if value is None or value <= 0:
            continue
        h = plot_h * value / top
        x = _LEFT + slot * i + slot * 0.15
        parts.append(
            f'<rect class="bar" x="{x:.1f}" y="{_TOP + plot_h - h:.1f}" '
            f'width="{slot * 0.7:.1f}" height="{h:.1f}">'
            f"<title>{escape(label)}: {escape(fmt(value))}</title></rect>"
        )
    parts.extend(_x_labels(labels, slot))
    parts.append("</svg>")
    return Markup("".join(parts))


def line_chart(
    labels: Sequence[str],
    series: Sequence[tuple[str, Sequence[float | None]]],
    *,
    title: str,
    fmt: Callable[[float], str],
    unit: str = "",
) -> Markup:
    """One polyline per named series (classes `series-0`, `series-1`…), a dot per value;
    `unit` labels the y axis."""
    values = [v for _, points in series for v in points if v is not None]
    top = _nice_ceiling(max(values, default=0.0))
    plot_w = WIDTH - _LEFT - _RIGHT
    plot_h = HEIGHT - _TOP - _BOTTOM
    slot = plot_w / max(1, len(labels))
    parts = _frame(top, fmt, title, unit)
    for n, (name, points) in enumerate(series):
        coords = []
        dots = []
        for i, value in enumerate(points):
            if value is None:
                continue
            x = _LEFT + slot * (i + 0.5)
            y = _TOP + plot_h - plot_h * value / top
            coords.append(f"{x:.1f},{y:.1f}")
            dots.append(
                f'<circle class="dot series-{n}" cx="{x:.1f}" cy="{y:.1f}" r="3">'
                f"<title>{escape(labels[i])} {escape(name)}: {escape(fmt(value))}</title></circle>"
            )
        if len(coords) > 1:
            parts.append(f'<polyline class="line series-{n}" points="{" ".join(coords)}"/>')
        parts.extend(dots)
    parts.extend(_x_labels(labels, slot))
    parts.append("</svg>")
    return Markup("".join(parts))

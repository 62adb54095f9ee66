"""A small PNG of a usage report: input-per-call p50 bars, cache hit and write rate lines."""

from __future__ import annotations

import io
import itertools
import math

from PIL import Image, ImageDraw, ImageFont

from bot.services.usage_render import format_tokens
from bot.services.usage_report import UsageReport, UsageRow

MAX_DAYS = 31
BACKGROUND = (255, 255, 255)
AXIS = (110, 110, 110)
GRID = (228, 228, 228)
BAR = (76, 120, 168)
P90 = (30, 55, 90)
LINE = (228, 120, 30)
WRITE_LINE = (150, 60, 160)
TEXT = (40, 40, 40)


def render_usage_chart(report: UsageReport, *, width: int = 640, height: int = 320) -> bytes:
    """PNG bytes: bars of input tokens per call (p50, a tick at p90) on the left axis and the
    cache hit rate and the cache write rate (writes / input, 0-100 %) as lines on the right
    axis, one slot per day (the last 31). The write line is drawn only when a day has writes."""
    if width < 160 or height < 120:
        raise ValueError("the chart needs at least 160x120 pixels")
    rows = report.days[-MAX_DAYS:]
    image = Image.new("RGB", (width, height), BACKGROUND)
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default_imagefont()
    left, right, top, bottom = 52, width - 40, 26, height - 30
    draw.text((left, 7), "input/call p50 (bars, p90 tick)", fill=BAR, font=font)
    legend = "cache hit % (line)"
    writes = any(row.cache_write_tokens for row in rows)
    legend_x = right - _text_width(draw, legend, font)
    if writes:
        write_legend = "write %"
        legend_x -= _text_width(draw, write_legend + "  ", font)
        draw.text(
            (right - _text_width(draw, write_legend, font), 7),
            write_legend,
            fill=WRITE_LINE,
            font=font,
        )
    draw.text((legend_x, 7), legend, fill=LINE, font=font)

    peak = max((row.input_p90 or row.input_p50 or 0 for row in rows), default=0)
    scale_max = _nice_ceiling(peak)
    for i in range(5):
        y = bottom - (bottom - top) * i / 4
        draw.line((left, y, right, y), fill=GRID)
        label = format_tokens(round(scale_max * i / 4))
        draw.text((left - 4 - _text_width(draw, label, font), y - 5), label, fill=TEXT, font=font)
        draw.text((right + 4, y - 5), f"{25 * i}%", fill=TEXT, font=font)
    draw.line((left, top, left, bottom), fill=AXIS)
    draw.line((right, top, right, bottom), fill=AXIS)
    draw.line((left, bottom, right, bottom), fill=AXIS)

    if not rows or not any(row.calls for row in rows):
        message = "no model calls"
        draw.text(
            ((left + right - _text_width(draw, message, font)) / 2, (top + bottom) / 2 - 5),
            message,
            fill=AXIS,
            font=font,
        )
        return _png(image)

    slot = (right - left) / len(rows)
    bar_width = max(2.0, slot * 0.6)
    points: list[tuple[float, float] | None] = []
    write_points: list[tuple[float, float] | None] = []
    label_every = max(1, math.ceil(36 / slot))
    for i, row in enumerate(rows):
        centre = left + slot * (i + 0.5)
        _draw_bars(draw, row, centre, bar_width, top, bottom, scale_max)
        if row.cache_hit_rate is None:
            points.append(None)
        else:
            points.append((centre, bottom - (bottom - top) * row.cache_hit_rate))
        rate = row.cache_write_rate
        write_points.append(
            None if not writes or rate is None else (centre, bottom - (bottom - top) * rate)
        )
        if (len(rows) - 1 - i) % label_every == 0 and row.day is not None:
            label = row.day.strftime("%m-%d")
            x = centre - _text_width(draw, label, font) / 2
            draw.text((x, bottom + 6), label, fill=TEXT, font=font)
    for series, colour in ((write_points, WRITE_LINE), (points, LINE)):
        _draw_line(draw, series, colour)
    return _png(image)


def _draw_line(
    draw: ImageDraw.ImageDraw, points: list[tuple[float, float] | None], colour: tuple[int, ...]
) -> None:
    for a, b in itertools.pairwise(points):
        if a is not None and b is not None:
            draw.line((a, b), fill=colour, width=2)
    for point in points:
        if point is not None:
            x, y = point
            draw.ellipse((x - 3, y - 3, x + 3, y + 3), fill=colour)


def _draw_bars(
    draw: ImageDraw.ImageDraw,
    row: UsageRow,
    centre: float,
    bar_width: float,
    top: int,
    bottom: int,
    scale_max: int,
) -> None:
    def y_of(value: int) -> float:
        return bottom - (bottom - top) * min(value, scale_max) / scale_max

    if row.input_p50:
        draw.rectangle(
            (centre - bar_width / 2, y_of(row.input_p50), centre + bar_width / 2, bottom - 1),
            fill=BAR,
        )
    if row.input_p90:
        y = y_of(row.input_p90)
        draw.line((centre - bar_width / 2, y, centre + bar_width / 2, y), fill=P90, width=2)


def _nice_ceiling(value: int) -> int:
    """The smallest of 1, 2, 2.5, 5 x 10^k at or above `value` (at least 1,000)."""
    if value <= 1_000:
        return 1_000
    magnitude = int(10 ** math.floor(math.log10(value)))
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * magnitude:
            return int(step * magnitude)
    return 10 * magnitude  # pragma: no cover - the loop always returns


def _text_width(draw: ImageDraw.ImageDraw, text: str, font: ImageFont.ImageFont) -> float:
    return draw.textlength(text, font=font)


def _png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()

from __future__ import annotations

import io
from dataclasses import replace
from datetime import date, timedelta

import pytest
from PIL import Image

from bot.services.chart import render_usage_chart
from bot.services.usage_report import UsageReport, UsageRow

DAYS = [date(2026, 3, 1) + timedelta(days=i) for i in range(7)]


def report(p50: int = 9_000, hit: float | None = 0.6, days: list[date] = DAYS) -> UsageReport:
    rows = tuple(
        UsageRow(
            label=d.isoformat(),
            day=d,
            calls=10,
            input_p50=p50 + 500 * i,
            input_p90=p50 * 2,
            cache_hit_rate=hit,
        )
        for i, d in enumerate(days)
    )
    return UsageReport(zone="UTC", days=rows, total=UsageRow(label="total", day=None))


def decode(png: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(png))
    assert image.format == "PNG"
    return image


@pytest.mark.parametrize(("width", "height"), [(640, 320), (480, 240)], ids=["default", "small"])
def test_the_chart_is_a_png_of_the_asked_size(width: int, height: int) -> None:
    assert decode(render_usage_chart(report(), width=width, height=height)).size == (width, height)


def test_different_data_draw_a_different_chart() -> None:
    base = render_usage_chart(report())
    assert render_usage_chart(report()) == base  # deterministic
    assert render_usage_chart(report(p50=4_000)) != base
    assert render_usage_chart(report(hit=0.2)) != base


def test_empty_and_sparse_reports_still_draw() -> None:
    empty = UsageReport(zone="UTC", days=(), total=UsageRow(label="total", day=None))
    assert decode(render_usage_chart(empty)).size == (640, 320)
    sparse = report(hit=None)
    sparse = replace(sparse, days=(*sparse.days[:3], replace(sparse.days[3], calls=0)))
    assert decode(render_usage_chart(sparse)).size == (640, 320)
    month = report(days=[date(2026, 1, 1) + timedelta(days=i) for i in range(60)])
    assert decode(render_usage_chart(month)).size == (640, 320)


def test_a_tiny_canvas_is_refused() -> None:
    with pytest.raises(ValueError, match="at least"):
        render_usage_chart(report(), width=100, height=50)


def test_days_with_cache_writes_draw_a_write_rate_line_in_its_own_colour() -> None:
    plain = report()
    written = replace(
        plain,
        days=tuple(
            replace(row, cache_write_tokens=3_000, cache_write_rate=0.3) for row in plain.days
        ),
    )
    image = decode(render_usage_chart(written)).convert("RGB")
    colours = {colour for _, colour in image.getcolors(maxcolors=1 << 16) or []}
    assert (150, 60, 160) in colours
    plain_colours = {
        colour
        for _, colour in decode(render_usage_chart(plain)).convert("RGB").getcolors(1 << 16) or []
    }
    assert (150, 60, 160) not in plain_colours

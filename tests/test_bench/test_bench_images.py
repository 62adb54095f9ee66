"""The photos bench on a small workload: images reach the model, the history prefix keeps
the text-only run's breaks (photos never change what is cached)."""

from __future__ import annotations

from bench.bench_images import run


def test_photos_ride_on_the_current_message_and_leave_the_prefix_alone() -> None:
    result = run(size=120, seed=7)
    assert result.photo_messages > 0
    assert result.images_sent > 0
    assert result.tokens_per_image == 765  # 1280x960 sent as 1024x768: 85 + 4 x 170
    assert result.photos.prefix_breaks == result.text.prefix_breaks
    assert abs(result.points) <= 3
    assert "| photos on " in result.markdown

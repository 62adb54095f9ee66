"""`build_routes`: each provider profile becomes a route with its adapter and prices."""

from __future__ import annotations

from pathlib import Path

from bot.app.model_routes import build_routes
from tests.rig import rig_settings


async def test_a_profile_prices_one_hour_cache_writes_apart(tmp_path: Path) -> None:
    profile = {"base_url": "https://api.anthropic.com", "model": "claude-sonnet-4-5"}
    prices = {"price_input_per_mtok": 3.0, "price_cache_write_per_mtok": 3.75}
    settings = rig_settings(
        tmp_path,
        providers={
            "default_1h": {**profile, **prices},
            "set_1h": {**profile, **prices, "price_cache_write_1h_per_mtok": 5.0},
        },
    )
    routes = build_routes(settings)
    try:
        assert routes.resolve("default_1h").prices.hour_write_per_mtok == 6.0  # 2 × input
        assert routes.resolve("set_1h").prices.hour_write_per_mtok == 5.0
    finally:
        await routes.aclose()

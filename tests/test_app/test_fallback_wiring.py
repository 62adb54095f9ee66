"""A profile's `fallbacks` are read at start: a chain naming a profile that does not exist,
or the profile itself, stops the start with the setting's dotted name."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.app.wiring import build_routes
from bot.errors import ConfigError
from tests.rig import rig_settings


def profiles(**fallbacks: list[str]) -> dict[str, object]:
    return {
        name: {"base_url": "http://127.0.0.1:9/v1", "model": f"{name}-model", "fallbacks": chain}
        for name, chain in fallbacks.items()
    }


def test_the_chains_of_the_profiles_are_built(tmp_path: Path) -> None:
    settings = rig_settings(tmp_path, providers=profiles(main=["spare"], spare=[]))
    routes = build_routes(settings)
    assert routes.chains is not None
    assert routes.resolve_for(1, "main").profile == "main"


def test_no_profile_with_fallbacks_builds_no_chains(tmp_path: Path) -> None:
    assert build_routes(rig_settings(tmp_path)).chains is None


@pytest.mark.parametrize(
    ("chain", "why"),
    [(["spar"], "'spar': no provider profile named 'spar'"), (["main"], "'main': itself")],
)
def test_a_chain_naming_an_unknown_profile_or_itself_is_refused(
    tmp_path: Path, chain: list[str], why: str
) -> None:
    settings = rig_settings(tmp_path, providers=profiles(main=chain, spare=[]))
    with pytest.raises(ConfigError, match=r"providers\.main\.fallbacks") as refused:
        build_routes(settings)
    assert why in str(refused.value)

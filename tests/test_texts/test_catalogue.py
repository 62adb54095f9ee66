"""The text catalogue: both locales say the same things with the same placeholders, and
every key the code asks for exists."""

from __future__ import annotations

import ast
import string
from pathlib import Path

import pytest

from bot.texts import CATALOGUES, text

ROOT = Path(__file__).resolve().parents[2]


def placeholders(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}


def test_both_locales_have_the_same_keys() -> None:
    assert set(CATALOGUES["zh"]) == set(CATALOGUES["en"])


@pytest.mark.parametrize("key", sorted(CATALOGUES["en"]))
def test_both_locales_fill_the_same_placeholders(key: str) -> None:
    assert placeholders(CATALOGUES["zh"][key]) == placeholders(CATALOGUES["en"][key])


def test_a_text_is_filled_in() -> None:
    assert text("en", "model_unknown", name="x", choices="a, b") == (
        "No model profile named x. Available: a, b"
    )
    assert text("zh", "summary_caption", n=7) == "最近 7 天单次输入 p50 与缓存命中率"


def test_an_unknown_key_raises() -> None:
    with pytest.raises(KeyError, match="no_such_text"):
        text("en", "no_such_text")


def keys_asked_for() -> set[str]:
    """Every literal key passed to `text(locale, "key", ...)` or `self._say(session, "key",
    ...)` in bot/."""
    keys: set[str] = set()
    for path in (ROOT / "bot").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and (
                    (isinstance(node.func, ast.Name) and node.func.id == "text")
                    or (isinstance(node.func, ast.Attribute) and node.func.attr == "_say")
                )
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
            ):
                keys.add(node.args[1].value)
    return keys


def test_every_key_the_code_asks_for_exists() -> None:
    asked = keys_asked_for()
    assert {"owner_only", "rate_limited", "summary_title", "restarted_cut"} <= asked
    assert asked <= set(CATALOGUES["en"])


@pytest.mark.parametrize("key", ["overflow", "capacity", "provider", "bad_response"])
def test_a_failed_turn_has_its_message(key: str) -> None:
    """`TurnFailed.key` values: the runtime says these when a turn fails."""
    assert text("en", key)
    assert text("zh", key)

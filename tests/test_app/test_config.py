from __future__ import annotations

from pathlib import Path

import pytest

from bot.config import load_settings
from bot.context.budget import UNKNOWN_WINDOW_TOKENS
from bot.context.tokens import estimate_text_tokens
from bot.context.tool_results import truncate_tool_result
from bot.errors import ConfigError


def test_defaults_are_the_embedded_ones() -> None:
    settings = load_settings()
    assert settings.bot_timezone == "UTC"
    assert settings.bot_locale == "zh"
    assert settings.data_dir == Path("./data")
    assert settings.resolved_database_url == "sqlite+aiosqlite:///data/tgbot.sqlite3"
    assert settings.history.group_tokens == 8_000
    assert settings.history.private_tokens == 12_000
    assert settings.history.owner_tokens == 24_000
    assert settings.runtime.max_tool_iterations == 10
    assert settings.runtime.max_tool_result_chars == 16_000


def test_a_default_sized_cjk_tool_result_fits_the_unknown_window() -> None:
    """The defaults agree: a result capped at the default is, even in Chinese (one token
    per character), at most half the window assumed when a route's window is unknown."""
    cap = load_settings(data_dir=Path("./data")).runtime.max_tool_result_chars
    capped = truncate_tool_result("字" * 100_000, cap)
    note = estimate_text_tokens("\n\n[... 84000 characters truncated ...]\n\n")
    assert estimate_text_tokens(capped) <= UNKNOWN_WINDOW_TOKENS // 2 + note


def test_environment_names_of_the_contract(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {
        "BOT_TOKEN": "123:abc",
        "TELEGRAM_API_BASE": "http://127.0.0.1:9999/",
        "OWNER_ID": "42",
        "LLM_BASE_URL": "http://127.0.0.1:8000/v1",
        "LLM_API_KEY": "sk-secret",
        "LLM_MODEL": "deepseek-chat",
        "LLM_CONTEXT_WINDOW": "64000",
        "DATABASE_URL": "postgresql+asyncpg://u@h/db",
        "DATA_DIR": "/tmp/x",
        "BOT_TIMEZONE": "Asia/Shanghai",
        "BOT_LOCALE": "en",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    s = load_settings()
    assert s.bot_token is not None
    assert s.bot_token.get_secret_value() == "123:abc"
    assert s.telegram_api_base == "http://127.0.0.1:9999"
    assert s.owner_id == 42
    assert s.llm_model == "deepseek-chat"
    assert s.llm_context_window == 64_000
    assert s.resolved_database_url == "postgresql+asyncpg://u@h/db"
    assert s.bot_locale == "en"
    assert "sk-secret" not in repr(s)
    assert "123:abc" not in repr(s)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("BOT_TIMEZONE", "Mars/Base"),
        ("OWNER_ID", "not-a-number"),
        ("BOT_LOCALE", "fr"),
        ("TELEGRAM_API_BASE", "ftp://x"),
    ],
    ids=["zone", "owner", "locale", "api-base"],
)
def test_a_bad_value_names_the_setting(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert info.value.setting == name
    assert "\n" not in str(info.value)


def test_toml_file_fills_the_rest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "bot.toml"
    config.write_text(
        'llm_model = "from-file"\n'
        "[history]\ngroup_tokens = 4000\n"
        '[providers.deepseek]\nbase_url = "https://api.deepseek.com/v1"\n'
        'model = "deepseek-chat"\ncontext_window = 64000\n',
        encoding="utf-8",
    )
    monkeypatch.setenv("LLM_MODEL", "from-env")
    s = load_settings(config)
    assert s.history.group_tokens == 4000
    assert s.providers["deepseek"].context_window == 64_000
    assert s.llm_model == "from-env"  # the environment wins over the file


def test_missing_or_bad_toml_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_settings(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[history]\ngroup_tokens = -5\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings(bad)
    assert info.value.setting == "history.group_tokens"

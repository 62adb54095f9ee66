from __future__ import annotations

from pathlib import Path

import pytest

from bot.config import load_settings
from bot.context.tokens import estimate_text_tokens
from bot.context.tool_results import truncate_tool_result
from bot.context.window import UNKNOWN_WINDOW_TOKENS
from bot.errors import ConfigError


def test_defaults_are_the_embedded_ones() -> None:
    settings = load_settings()
    assert settings.bot_timezone == "UTC"
    assert settings.bot_locale == "auto"
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
        "TGBOT_LOG_LEVEL": "DEBUG",
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
    assert s.tgbot_log_level == "DEBUG"
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


@pytest.mark.parametrize(
    ("toml", "dotted", "guess"),
    [
        ("[security]\nallowed_chat = [1]\n", "security.allowed_chat", "security.allowed_chats"),
        ("[history]\ngroup_token = 4000\n", "history.group_token", "history.group_tokens"),
        (
            "[runtime]\nmax_tool_iteration = 3\n",
            "runtime.max_tool_iteration",
            "runtime.max_tool_iterations",
        ),
        (
            '[providers.x]\nbase_url = "https://a.example/v1"\nprice_input_per_mtk = 1.0\n',
            "providers.x.price_input_per_mtk",
            "providers.x.price_input_per_mtok",
        ),
        (
            "[history.group]\nmax_recent_message = 30\n",
            "history.group.max_recent_message",
            "history.group.max_recent_messages",
        ),
        ('bot_usrname = "x"\n', "bot_usrname", "bot_username"),
    ],
    ids=["security", "history", "runtime", "price", "scene", "top-level"],
)
def test_an_unknown_toml_key_is_refused_with_the_file_and_a_guess(
    tmp_path: Path, toml: str, dotted: str, guess: str
) -> None:
    config = tmp_path / "bot.toml"
    config.write_text(toml, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings(config)
    assert info.value.setting == dotted
    assert str(info.value) == f"{config}: {dotted}: unknown key (did you mean {guess}?)"


def test_an_unknown_nested_env_variable_is_named_as_an_env_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HISTORY__GROUP_TOKEN", "5")
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert str(info.value) == (
        "HISTORY__GROUP_TOKEN: unknown setting (did you mean HISTORY__GROUP_TOKENS?)"
    )


def test_a_bad_value_is_named_where_it_was_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "bot.toml"
    config.write_text("[history]\ngroup_tokens = -1\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings(config)
    assert str(info.value).startswith(f"{config}: history.group_tokens: ")
    monkeypatch.setenv("HISTORY__GROUP_TOKENS", "many")
    with pytest.raises(ConfigError) as info:
        load_settings(config)  # the environment wins, and is named as such
    assert str(info.value).startswith("HISTORY__GROUP_TOKENS: ")


def test_an_unknown_top_level_key_is_a_toml_key_not_an_env_name(tmp_path: Path) -> None:
    config = tmp_path / "bot.toml"
    config.write_text("colour = 1\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings(config)
    assert str(info.value) == f"{config}: colour: unknown key"


def test_every_section_forbids_unknown_keys() -> None:
    """A section added later (a helper's `[telegram]`, a provider field) derives from
    `Section`, so an unknown key through the environment or code is refused too."""
    from pydantic import BaseModel

    from bot.config import Section, Settings
    from bot.config_errors import section_of

    seen: list[type[BaseModel]] = []
    todo: list[type[BaseModel]] = [Settings]
    while todo:
        model = todo.pop()
        for field in model.model_fields.values():
            inner, _ = section_of(field.annotation)
            if inner is not None and inner not in seen:
                seen.append(inner)
                todo.append(inner)
    assert len(seen) >= 8
    for model in seen:
        assert issubclass(model, Section), model.__name__
        if getattr(model, "keyed_extra", None) is not None:  # `[chats]`: ids beside names
            assert model.model_config.get("extra") == "allow", model.__name__
            continue
        assert model.model_config.get("extra") == "forbid", model.__name__


@pytest.mark.parametrize("token", ["", "   ", "short-token"], ids=["empty", "blank", "short"])
def test_a_short_dashboard_token_is_refused(monkeypatch: pytest.MonkeyPatch, token: str) -> None:
    monkeypatch.setenv("DASHBOARD_TOKEN", token)
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert info.value.setting == "DASHBOARD_TOKEN"
    assert "at least 16 characters" in str(info.value)
    assert "\n" not in str(info.value)


def test_a_long_dashboard_token_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DASHBOARD_TOKEN", "0123456789abcdef")
    token = load_settings().dashboard_token
    assert token is not None
    assert token.get_secret_value() == "0123456789abcdef"


def test_a_profiles_reasoning_and_extra_body_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "bot.toml"
    config.write_text(
        '[providers.ds]\nbase_url = "https://api.deepseek.com"\nreasoning = "max"\n'
        '[providers.ds.extra_body]\ntop_p = 0.95\nthinking = { type = "enabled" }\n',
        encoding="utf-8",
    )
    monkeypatch.setenv("LLM_REASONING", "off")
    settings = load_settings(config)
    profile = settings.providers["ds"]
    assert (profile.reasoning, settings.llm_reasoning) == ("max", "off")
    assert profile.extra_body == {"top_p": 0.95, "thinking": {"type": "enabled"}}


@pytest.mark.parametrize("owned", ["model", "messages", "max_tokens", "system", "stream"])
def test_extra_body_may_not_set_what_the_bot_writes(tmp_path: Path, owned: str) -> None:
    config = tmp_path / "bot.toml"
    config.write_text(
        f'[providers.x]\nbase_url = "https://api.anthropic.com"\nextra_body = {{ {owned} = 1 }}\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as info:
        load_settings(config)
    message = str(info.value)
    assert "\n" not in message
    assert f"providers.x.extra_body: {owned}: the bot writes this itself" in message
    assert str(config) in message


def test_an_unknown_reasoning_level_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_REASONING", "extreme")
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert str(info.value).startswith("LLM_REASONING:")


def test_a_list_in_a_variable_is_json_and_a_bare_list_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SECURITY__ALLOWED_CHATS", "[-1001234, -1005678]")
    assert load_settings().security.allowed_chats == [-1001234, -1005678]
    monkeypatch.setenv("SECURITY__ALLOWED_CHATS", "-1001234,-1005678")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value).startswith("SECURITY__ALLOWED_CHATS: not valid JSON")

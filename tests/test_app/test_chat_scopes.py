"""`[chats."<id>"]` and its topics: strict keys, inheritance, persona files and patterns
checked at start-up (bot.app.chat_scopes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.app.chat_scopes import chat_scopes
from bot.config import load_settings
from bot.errors import ConfigError

GROUP = -1001234


def settings_of(tmp_path: Path, toml: str):  # type: ignore[no-untyped-def]
    config = tmp_path / "bot.toml"
    config.write_text(toml, encoding="utf-8")
    return load_settings(config)


@pytest.mark.parametrize(
    ("toml", "dotted", "guess"),
    [
        (f'[chats."{GROUP}"]\npersona = "x"\n', f"chats.{GROUP}.persona", "persona_file"),
        (
            f'[chats."{GROUP}".triggers]\nkeyword = ["a"]\n',
            f"chats.{GROUP}.triggers.keyword",
            "keywords",
        ),
        (
            f'[chats."{GROUP}".topics."7"]\nroutes = "x"\n',
            f"chats.{GROUP}.topics.7.routes",
            "route",
        ),
        (f'[chats."{GROUP}".tools]\ndenied = ["x"]\n', f"chats.{GROUP}.tools.denied", "deny"),
        ("[chats]\nadmin_mays = []\n", "chats.admin_mays", "admin_may"),
    ],
)
def test_unknown_keys_in_chat_tables_are_refused_with_a_guess(
    tmp_path: Path, toml: str, dotted: str, guess: str
) -> None:
    with pytest.raises(ConfigError) as info:
        settings_of(tmp_path, toml)
    assert info.value.setting == dotted
    parent = dotted.rsplit(".", 1)[0]
    assert str(info.value).endswith(f"unknown key (did you mean {parent}.{guess}?)")


def test_a_topic_inherits_its_chat_and_overrides_what_it_sets(tmp_path: Path) -> None:
    persona = tmp_path / "work.md"
    persona.write_text("You are the release bot.", encoding="utf-8")
    settings = settings_of(
        tmp_path,
        f"""
[triggers]
keywords = ["bot"]

[chats."{GROUP}"]
persona_file = "{persona.as_posix()}"
route = "cheap"
timezone = "Asia/Shanghai"

[chats."{GROUP}".tools]
deny = ["search_history"]

[chats."{GROUP}".topics."7"]
route = "smart"

[chats."{GROUP}".topics."7".triggers]
patterns = ['\\bv\\d+']
""",
    )
    scopes = chat_scopes(settings)
    chat, topic, other = scopes.of(GROUP), scopes.of(GROUP, 7), scopes.of(-5)
    assert (chat.persona, chat.route, chat.timezone) == (
        "You are the release bot.",
        "cheap",
        "Asia/Shanghai",
    )
    assert (topic.persona, topic.route, topic.timezone) == (chat.persona, "smart", chat.timezone)
    assert not topic.offers("search_history")
    assert other.offers("search_history")
    assert topic.triggers.keywords == ("bot",)
    assert topic.triggers.patterns == (r"\bv\d+",)
    assert scopes.of(GROUP, 8) == chat  # an unlisted topic is its chat
    assert other.persona == ""
    assert other.route is None


def test_a_missing_persona_file_is_one_error_naming_the_table(tmp_path: Path) -> None:
    settings = settings_of(tmp_path, f'[chats."{GROUP}"]\npersona_file = "nowhere.md"\n')
    with pytest.raises(ConfigError) as info:
        chat_scopes(settings)
    assert info.value.setting == f'chats."{GROUP}".persona_file'


def test_a_catastrophic_pattern_is_refused_naming_where_it_is(tmp_path: Path) -> None:
    settings = settings_of(tmp_path, f"[chats.\"{GROUP}\".triggers]\npatterns = ['(a+)+$']\n")
    with pytest.raises(ConfigError) as info:
        chat_scopes(settings)
    assert info.value.setting == f'chats."{GROUP}".triggers.patterns'
    assert "nested quantifiers" in str(info.value)


def test_a_key_of_chats_that_is_no_chat_id_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        settings_of(tmp_path, '[chats.general]\nroute = "x"\n')

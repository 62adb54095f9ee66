"""Issue 51, item 8: `tgbot init` and `tgbot doctor` say which private-chat policy applies
and why (the default `members` because an allow-list is set, `allow` without one, or the one
set in `[security] private_chats`)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from bot.app.init_command import init
from bot.app.init_options import InitOptions
from storage.migrate import upgrade_database
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer
from tests.test_app.test_doctor import TOKEN, _run, clean_env

__all__ = ["clean_env"]

GROUP = -100777
MEMBERS_BY_DEFAULT = (
    "members: the bot answers the private chats of members of the allowed groups (seen "
    "writing there, or confirmed by Telegram) (the default because allowed_chats is set; "
    "[security] private_chats chooses)"
)


async def _init(tmp_path: Path, config_text: str, allow: tuple[int, ...] | None) -> str:
    config = tmp_path / "bot.toml"
    config.write_text(config_text)
    out = io.StringIO()
    async with FakeBotApi(TOKEN) as api, FakeOpenAIServer() as llm:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("TELEGRAM_API_BASE", api.base_url)
            patch.setenv("LLM_API_KEY", "sk-test")
            options = InitOptions(
                interactive=False,
                token=TOKEN,
                provider="openai-compatible",
                base_url=llm.base_url,
                model="fake-model",
                owner_id=5,
                allow_chats=allow,
                timezone="UTC",
                locale="en",
                config=config,
                env_file=tmp_path / ".env",
            )
            assert await init(options, out=out) == 0, out.getvalue()
    return out.getvalue()


async def test_init_says_members_applies_because_it_set_an_allow_list(tmp_path: Path) -> None:
    out = await _init(tmp_path, "", (GROUP,))
    assert f"✔ private chats: {MEMBERS_BY_DEFAULT}\n" in out


async def test_init_says_allow_applies_without_an_allow_list(tmp_path: Path) -> None:
    out = await _init(tmp_path, "", None)
    assert (
        "✔ private chats: allow: the bot answers any Telegram user's private chat (the "
        "default without allowed_chats; [security] private_chats chooses)\n" in out
    )


async def test_init_says_a_policy_set_in_the_file_wins(tmp_path: Path) -> None:
    out = await _init(tmp_path, '[security]\nprivate_chats = "owner"\n', (GROUP,))
    assert (
        "✔ private chats: owner: the bot answers only the owner's private chat (set in "
        "[security] private_chats)\n" in out
    )


async def test_the_doctor_says_members_applies_with_an_allow_list(
    clean_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await upgrade_database(f"sqlite+aiosqlite:///{clean_env / 'tgbot.sqlite3'}")
    config = tmp_path / "bot.toml"
    config.write_text(f"[security]\nallowed_chats = [{GROUP}]\n")
    monkeypatch.setenv("BOT_CONFIG", str(config))
    _code, lines = await _run()  # no Bot API nor model here: only the access lines matter
    (line,) = [line for line in lines if line.startswith("✔ private_chats")]
    assert line == f"✔ private_chats: {MEMBERS_BY_DEFAULT}"

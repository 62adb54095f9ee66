"""`tgbot init` and git: the repository ignores the files init writes, and init says so (or
warns) when it writes into a git checkout, since `git add -A` would commit the bot token."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from bot.app.init_command import InitOptions, init
from bot.app.init_files import git_checkout, ignored_by_git
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "4242:git-SECRET-token"


def test_this_repository_ignores_what_init_writes_by_default() -> None:
    assert git_checkout(ROOT / ".env") == ROOT
    assert ignored_by_git(ROOT, ROOT / ".env")
    assert ignored_by_git(ROOT, ROOT / "bot.toml")
    assert not ignored_by_git(ROOT, ROOT / "README.md")


@pytest.mark.parametrize(
    ("lines", "path", "ignored"),
    [
        ("/bot.toml", "bot.toml", True),
        ("/bot.toml", "conf/bot.toml", False),
        ("bot.toml", "conf/bot.toml", True),
        ("conf/*.toml", "conf/bot.toml", True),
        ("*.env\n!keep.env", "keep.env", False),
        ("# .env", ".env", False),
    ],
)
def test_the_common_gitignore_patterns_are_read_as_git_reads_them(
    tmp_path: Path, lines: str, path: str, ignored: bool
) -> None:
    (tmp_path / ".gitignore").write_text(lines + "\n")
    assert ignored_by_git(tmp_path, tmp_path / path) is ignored


async def _init_into(top: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    async with FakeBotApi(TOKEN) as api, FakeOpenAIServer(model_name="m") as llm:
        monkeypatch.setenv("TELEGRAM_API_BASE", api.base_url)
        options = InitOptions(
            interactive=False,
            token=TOKEN,
            provider="openai-compatible",
            base_url=llm.base_url,
            model="m",
            api_key_env="",
            owner_id=1001,
            timezone="UTC",
            locale="en",
            config=top / "bot.toml",
            env_file=top / ".env",
        )
        out = io.StringIO()
        assert await init(options, out=out) == 0
    return out.getvalue()


async def test_init_warns_when_a_checkout_would_commit_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".git").mkdir()
    out = await _init_into(tmp_path, monkeypatch)
    assert (
        f"✘ {tmp_path / '.env'} is in the git checkout {tmp_path} and not in its .gitignore: "
        "add it there, or `git add -A` commits the bot token and the model key"
    ) in out
    assert f"✘ {tmp_path / 'bot.toml'} is in the git checkout" in out


async def test_init_says_the_checkout_keeps_its_files_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text(".env\nbot.toml\n")
    out = await _init_into(tmp_path, monkeypatch)
    assert (
        f"{tmp_path / '.env'} is in the git checkout {tmp_path}; its .gitignore keeps it out" in out
    )
    assert "not in its .gitignore" not in out


async def test_outside_a_checkout_init_says_nothing_of_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = await _init_into(tmp_path, monkeypatch)
    assert "git" not in out

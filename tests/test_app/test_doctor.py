"""`tgbot doctor`: one ✔/✘ line per check against a fake Bot API and a fake OpenAI-compatible
server on 127.0.0.1; non-zero when any check fails."""

from __future__ import annotations

import io
import socket
from pathlib import Path

import pytest

from bot.app.doctor import doctor
from storage.migrate import upgrade_database
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer

TOKEN = "123456:doctor-SECRET-token"
OWNER = 4242


@pytest.fixture
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in (
        "BOT_CONFIG", "DATABASE_URL", "DASHBOARD_PORT", "DASHBOARD_TOKEN", "OWNER_ID",
        "LLM_BASE_URL", "LLM_API_KEY", "LLM_MODEL", "OPENAI_API_KEY", "BOT_LOCALE",
        "WEBHOOK_URL",
    ):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setenv("DATA_DIR", str(data))
    monkeypatch.setenv("BOT_TOKEN", TOKEN)
    # a test that brings no fake Bot API gets a refused connection, not the real Telegram
    monkeypatch.setenv("TELEGRAM_API_BASE", "http://127.0.0.1:9")
    return data


async def _run() -> tuple[int, list[str]]:
    out = io.StringIO()
    code = await doctor(None, out=out)
    return code, out.getvalue().splitlines()


async def test_every_check_passes_on_a_healthy_setup(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await upgrade_database(f"sqlite+aiosqlite:///{clean_env / 'tgbot.sqlite3'}")
    async with (
        FakeBotApi(TOKEN, username="doc_bot", reads_all_group_messages=True) as api,
        FakeOpenAIServer() as llm,
    ):
        api.user_message(OWNER, {"id": OWNER, "first_name": "Olga"}, "/start", chat_type="private")
        monkeypatch.setenv("TELEGRAM_API_BASE", api.base_url)
        monkeypatch.setenv("LLM_BASE_URL", llm.base_url)
        monkeypatch.setenv("LLM_MODEL", "fake-model")
        monkeypatch.setenv("OWNER_ID", str(OWNER))
        code, lines = await _run()
        assert len(llm.requests) == 1  # one tiny request
        assert not api.calls_of("sendMessage")  # reaching the owner sends nothing
    assert code == 0, lines
    assert [line.split(":")[0] for line in lines] == [
        "✔ settings",
        "✔ database",
        "✔ DATA_DIR",
        "✔ Telegram",
        "✔ privacy mode",
        "✔ OWNER_ID",
        "✔ webhook",
        "⚠ allowed_chats",  # none: every group is answered, a warning that passes
        "✔ private_chats",
        "✔ model default",
        "⚠ context window default",  # LLM_CONTEXT_WINDOW unset
        "✔ images",
        "✔ prices",
        "✔ locale",
        "✔ dashboard",
    ]
    assert "@doc_bot" in lines[3]
    assert "(Olga): the bot can message them" in lines[5]
    assert "long polling" in lines[6]
    assert "every group anyone adds it to" in lines[7]
    assert "allow: the bot answers any Telegram user's private chat" in lines[8]
    assert "cache reads" in lines[9]
    assert "cache writes" in lines[9]
    assert "LLM_CONTEXT_WINDOW" in lines[10]
    assert "not set for default" in lines[12]
    assert "auto" in lines[13]
    assert all(TOKEN not in line for line in lines)


async def test_each_failure_is_one_line_and_the_exit_code_says_so(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # no database yet, a token the Bot API refuses, nothing listening for the model, a
    # dashboard port already taken
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        async with FakeBotApi("999:another-token") as api:
            monkeypatch.setenv("TELEGRAM_API_BASE", api.base_url)
            monkeypatch.setenv("LLM_BASE_URL", "http://127.0.0.1:9/v1")
            monkeypatch.setenv("LLM_MODEL", "some-model")
            monkeypatch.setenv("DASHBOARD_PORT", str(port))
            code, lines = await _run()
    assert code == 1
    assert [line.split(":")[0] for line in lines] == [
        "✔ settings",
        "✔ database",  # none yet: `tgbot run` makes it
        "✔ DATA_DIR",
        "✘ Telegram",
        "⚠ allowed_chats",
        "✔ private_chats",
        "✘ model default",
        "⚠ context window default",
        "✔ images",
        "✔ prices",
        "✔ locale",
        "✘ dashboard",
    ]
    assert "no database yet at" in lines[1]
    assert "fix: check the base URL" in lines[6]
    assert not (clean_env / "tgbot.sqlite3").exists()  # the check created nothing
    assert all(TOKEN not in line for line in lines)


async def test_bad_settings_stop_at_the_first_line(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOT_TIMEZONE", "Mars/Base")
    code, lines = await _run()
    assert code == 2
    assert len(lines) == 1
    assert lines[0].startswith("✘ settings: BOT_TIMEZONE: unknown time zone")


async def test_doctor_says_which_routes_see_images(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "bot.toml"
    config.write_text(
        '[providers.claude]\nbase_url = "https://api.anthropic.com"\nkind = "anthropic"\n'
        "vision = true\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("LLM_VISION", "true")
    out = io.StringIO()
    await doctor(str(config), out=out)
    (line,) = [line for line in out.getvalue().splitlines() if line.startswith("✔ images")]
    assert "vision on for claude, default" in line, line


def _fix_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("✘")]


async def test_telegram_lines_name_privacy_mode_a_missing_owner_and_a_stray_webhook(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeBotApi(TOKEN, username="doc_bot") as api:
        api.webhook_url = "https://old.example.com/hook"
        monkeypatch.setenv("TELEGRAM_API_BASE", api.base_url)
        _, lines = await _run()
    failed = {line.split(":")[0]: line for line in _fix_lines(lines)}
    assert (
        "fix: @BotFather → /mybots → @doc_bot → Bot Settings → Group Privacy → Turn off"
        in (failed["✘ privacy mode"])
    )
    assert failed["✘ OWNER_ID"] == (
        "✘ OWNER_ID: unset: owner commands (/usage, /context, /model) and the daily summary "
        "are off; fix: send /id to @doc_bot and set OWNER_ID (or run `tgbot init`)"
    )
    assert "409 Conflict; fix: set WEBHOOK_URL" in failed["✘ webhook"]


async def test_an_owner_who_never_started_the_bot_is_unreachable(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeBotApi(TOKEN, username="doc_bot", reads_all_group_messages=True) as api:
        monkeypatch.setenv("TELEGRAM_API_BASE", api.base_url)
        monkeypatch.setenv("OWNER_ID", "777")
        _, lines = await _run()
    (owner,) = [line for line in lines if line.startswith("✘ OWNER_ID")]
    assert "777: the bot cannot message this user" in owner
    assert owner.endswith("fix: send /start to @doc_bot from that account")


async def test_every_route_gets_its_line_and_each_mistake_its_fix(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    async with FakeOpenAIServer() as good, FakeOpenAIServer() as refusing:
        refusing.fail_next(401, {"error": {"message": "Incorrect API key provided"}})
        config = tmp_path / "bot.toml"
        config.write_text(
            'default_provider = "main"\n'
            "[providers.main]\n"
            f'base_url = "{good.base_url}"\n'
            'api_key_env = "MAIN_KEY"\n'
            'model = "fake-model"\n'
            "price_input_per_mtok = 0.14\n"
            "price_output_per_mtok = 0.28\n"
            "[providers.cheap]\n"
            f'base_url = "{refusing.base_url}"\n'
            'api_key_env = "CHEAP_KEY"\n'
            'model = "small-model"\n'
            "[providers.spare]\n"
            f'base_url = "{good.base_url}"\n'
            'api_key_env = "SPARE_KEY"\n'
            'model = "fake-model"\n'
        )
        monkeypatch.setenv("MAIN_KEY", "sk-main")
        monkeypatch.setenv("CHEAP_KEY", "sk-wrong")
        monkeypatch.setenv("LLM_BASE_URL", good.base_url)  # LLM_MODEL forgotten
        out = io.StringIO()
        await doctor(str(config), out=out)
        lines = out.getvalue().splitlines()
        assert len(good.requests) == 1  # only the main profile reached a model
        assert len(refusing.requests) == 1
    by_name = {line.split(":")[0]: line for line in lines}
    assert by_name["✔ model main"].startswith(
        f"✔ model main: fake-model at {good.base_url} answered"
    )
    assert by_name["✘ model cheap"].endswith(
        "HTTP 401: Incorrect API key provided; fix: check the key in CHEAP_KEY"
    )
    assert by_name["✘ model spare"].endswith(
        "SPARE_KEY (providers.spare.api_key_env) is not set; fix: export SPARE_KEY=… (or put "
        "it in the .env file)"
    )
    assert by_name["✘ model default"] == (
        "✘ model default: LLM_MODEL: unset, so the bot would send the model name "
        f"`offline-demo` to {good.base_url}; fix: export LLM_MODEL=<model name>"
    )
    assert "set for main (USD)" in by_name["✔ prices"]
    assert "not set for cheap, spare, default" in by_name["✔ prices"]


async def test_a_provider_sdk_key_set_instead_of_llm_api_key(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLM_BASE_URL", "https://api.openai.com/v1")
    monkeypatch.setenv("LLM_MODEL", "gpt-4o-mini")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-in-the-wrong-variable")
    _, lines = await _run()
    (line,) = [line for line in lines if line.startswith("✘ model default")]
    assert line == (
        "✘ model default: LLM_API_KEY: unset, but OPENAI_API_KEY is set (the bot reads only "
        'LLM_API_KEY for https://api.openai.com/v1); fix: export LLM_API_KEY="$OPENAI_API_KEY"'
    )
    assert "sk-in-the-wrong-variable" not in "\n".join(lines)


async def test_doctor_checks_every_route_of_every_fallback_chain(
    clean_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeOpenAIServer() as good, FakeOpenAIServer() as down:
        down.fail_next(503, {"error": {"message": "overloaded"}}, times=5)
        config = tmp_path / "bot.toml"
        config.write_text(
            'default_provider = "main"\n'
            "[providers.main]\n"
            f'base_url = "{good.base_url}"\n'
            'model = "fake-model"\n'
            'fallbacks = ["spare", "broken"]\n'
            "[providers.spare]\n"
            f'base_url = "{good.base_url}"\n'
            'model = "fake-model"\n'
            'fallbacks = ["main"]\n'
            "fallback_cooldown_seconds = 60\n"
            "[providers.broken]\n"
            f'base_url = "{down.base_url}"\n'
            'model = "fake-model"\n'
        )
        out = io.StringIO()
        await doctor(str(config), out=out)
        assert len(down.requests) >= 1  # the fallback's own route was called
    by_name = {line.split(":")[0]: line for line in out.getvalue().splitlines()}
    assert by_name["✘ model broken"].startswith("✘ model broken: fake-model at")
    assert by_name["✘ fallbacks main"] == (
        "✘ fallbacks main: main → spare → broken: broken did not pass its check (its line "
        "above); fix: providers.main.fallbacks"
    )
    assert by_name["✔ fallbacks spare"] == (
        "✔ fallbacks spare: spare → main, every route answered (60 s cooldown)"
    )


async def test_a_bot_api_answer_it_cannot_read_names_the_method_and_keeps_the_rest(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeBotApi(TOKEN, username="doc_bot", reads_all_group_messages=True) as api:
        api.user_message(OWNER, {"id": OWNER, "first_name": "Olga"}, "/start", chat_type="private")
        api.fail_next("getWebhookInfo", error_code=502, description="Bad Gateway")
        monkeypatch.setenv("TELEGRAM_API_BASE", api.base_url)
        monkeypatch.setenv("OWNER_ID", str(OWNER))
        code, lines = await _run()
    assert code == 1
    telegram = [
        line for line in lines if line[2:].startswith(("Telegram", "privacy", "OWNER", "web"))
    ]
    assert [line[:9] for line in telegram] == ["✔ Telegra", "✔ privacy", "✔ OWNER_I", "✘ webhook"]
    assert telegram[3].startswith(
        f"✘ webhook: getWebhookInfo: could not read the answer of {api.base_url}"
    )
    assert "Bad Gateway" in telegram[3]


async def test_every_chat_table_is_checked_and_an_unseen_chat_is_a_warning(
    clean_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await upgrade_database(f"sqlite+aiosqlite:///{clean_env / 'tgbot.sqlite3'}")
    config = tmp_path / "bot.toml"
    config.write_text(
        """
[chats."-1001"]
persona_file = "missing-persona.md"
route = "nope:some-model"

[chats."-1001".tools]
deny = ["no_such_tool", "set_reaction"]

[chats."-1002".topics."5"]
route = "fine-model"
""",
        encoding="utf-8",
    )
    monkeypatch.setenv("BOT_CONFIG", str(config))
    code, lines = await _run()
    chats = [line for line in lines if line[2:].startswith("chats")]
    assert code == 1
    assert any(line.startswith("✘") and "persona_file" in line for line in chats), chats
    assert any(line.startswith("✘") and "no provider profile 'nope'" in line for line in chats)
    assert any(line.startswith("✘") and "'no_such_tool'" in line for line in chats)
    assert not any("'set_reaction'" in line for line in chats)  # a tool the bot has
    unseen = [line for line in chats if "never seen" in line]
    assert len(unseen) == 2
    assert all(line.startswith("✔") for line in unseen)  # a warning, not a failure

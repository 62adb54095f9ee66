"""The README's first run: `tgbot init --non-interactive`, then the printed next steps. The
doctor passes on what init wrote (the database and DATA_DIR `tgbot run` makes itself are not
failures), names the settings file, says who the bot answers, and init's next steps name the
`tgbot` it ran from."""

from __future__ import annotations

import io
import os
import shlex
from pathlib import Path

import pytest

from bot.app.doctor import doctor
from bot.app.init_command import InitOptions, init
from bot.app.init_files import read_env
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer

TOKEN = "4242:after-init-SECRET"
OWNER = 1001
GROUP = -100777


async def test_the_doctor_passes_right_after_init(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # DATA_DIR is ./data, which nothing has made yet
    async with (
        FakeBotApi(TOKEN, username="first_bot", reads_all_group_messages=True) as api,
        FakeOpenAIServer(model_name="fake-model") as llm,
    ):
        api.user_message(OWNER, {"id": OWNER, "first_name": "Olga"}, "/start", chat_type="private")
        monkeypatch.setenv("TELEGRAM_API_BASE", api.base_url)
        monkeypatch.setenv("MY_KEY", "sk-after-init")
        written = io.StringIO()
        options = InitOptions(
            interactive=False,
            token=TOKEN,
            provider="openai-compatible",
            base_url=llm.base_url,
            model="fake-model",
            api_key_env="MY_KEY",
            owner_id=OWNER,
            allow_chats=(GROUP,),
            timezone="UTC",
            locale="en",
        )
        assert await init(options, out=written) == 0
        said = written.getvalue()

        # the next steps, as printed: source the env file, then `<tgbot> doctor`
        steps = said.split("Next:\n", 1)[1].splitlines()
        assert steps[0] == "  set -a; . .env; set +a"
        command = shlex.split(steps[1].split("&&")[0])
        assert command[-1] == "doctor"
        assert os.path.isabs(command[0])
        assert os.access(command[0], os.X_OK)  # the venv's tgbot, or this Python
        monkeypatch.delenv("MY_KEY")
        for name, value in read_env((tmp_path / ".env").read_text()).items():
            monkeypatch.setenv(name, value)

        out = io.StringIO()
        code = await doctor(None, out=out)
    lines = out.getvalue().splitlines()
    assert code == 0, lines
    assert not (tmp_path / "data").exists()  # the doctor creates nothing
    by_name = {line[2:].split(":")[0]: line for line in lines}
    assert by_name["settings"] == (
        f"✔ settings: read from the environment and {tmp_path / 'bot.toml'} (BOT_CONFIG)"
    )
    assert "no database yet at" in by_name["database"]
    assert "`tgbot run` creates it" in by_name["DATA_DIR"]
    assert f"1 chat(s) ({GROUP}): the bot answers and stores only there" in by_name["allowed_chats"]
    assert by_name["private_chats"].startswith("✔ private_chats: ")
    # openai-compatible has no known window: a warning, not a failure
    assert by_name["context window openai-compatible"].startswith(
        "⚠ context window openai-compatible: unknown: the bot assumes 32,000 tokens"
    )

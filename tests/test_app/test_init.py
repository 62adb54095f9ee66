"""`tgbot init` against the fake Bot API and a fake OpenAI-compatible server: scripted through
its flags (a real `tgbot init` process, then `tgbot run` on what it wrote answers in a group),
and through its prompts under a pseudo-terminal."""

from __future__ import annotations

import asyncio
import codecs
import os
import pty
import stat
import sys
import tomllib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from bot.app.init_command import init
from bot.app.init_files import read_env
from bot.app.init_options import InitOptions
from bot.config import load_settings
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer
from tests.bot_process import BotProcess
from tests.deadlines import EVENT, PROCESS_READY, REAP, deadline

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "4242:init-SECRET-token"
KEY = "sk-init-secret-key"
OWNER = 1001
GROUP = -100777


async def _tgbot(*args: str, env: dict[str, str], cwd: Path) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.app.cli",
        *args,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(), deadline(PROCESS_READY))
    assert process.returncode is not None
    return process.returncode, out.decode()


def _base_env(tmp_path: Path, api: FakeBotApi) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "PYTHONPATH": str(ROOT),
        "TELEGRAM_API_BASE": api.base_url,
    }


@pytest.mark.slow
async def test_init_through_its_flags_then_the_bot_answers_in_a_group(tmp_path: Path) -> None:
    async with (
        FakeBotApi(TOKEN, username="team_helper_bot") as api,
        FakeOpenAIServer(model_name="fake-model") as llm,
    ):
        env = {**_base_env(tmp_path, api), "MY_MODEL_KEY": KEY}
        code, out = await _tgbot(
            "init", "--non-interactive", "--token", TOKEN,
            "--provider", "openai-compatible", "--base-url", llm.base_url,
            "--model", "fake-model", "--api-key-env", "MY_MODEL_KEY",
            "--owner-id", str(OWNER), "--allow-chat", str(GROUP), "--allow-chat", "-100888",
            "--timezone", "Asia/Shanghai", "--locale", "en",
            "--config", "conf/bot.toml", "--env-file", "conf/.env",
            env=env, cwd=tmp_path,
        )  # fmt: skip
        assert code == 0, out
        assert len(llm.requests) == 1  # the provider was tried with one call
        assert llm.headers[0]["authorization"] == f"Bearer {KEY}"
        assert api.calls_of("getMe")

    assert "✔ token: @team_helper_bot" in out
    assert "✘ privacy mode is on" in out
    assert "Group Privacy → Turn off" in out
    assert "✔ owner: user id 1001" in out
    assert "prices: not set" in out
    assert TOKEN not in out
    assert KEY not in out

    toml_text = (tmp_path / "conf/bot.toml").read_text()
    assert TOKEN not in toml_text
    assert KEY not in toml_text
    config = tomllib.loads(toml_text)
    assert config["owner_id"] == OWNER
    assert config["security"]["allowed_chats"] == [GROUP, -100888]
    assert config["default_provider"] == "openai-compatible"
    assert config["providers"]["openai-compatible"]["api_key_env"] == "MY_MODEL_KEY"
    assert config["bot_timezone"] == "Asia/Shanghai"
    assert config["bot_locale"] == "en"

    env_file = tmp_path / "conf/.env"
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    secrets = read_env(env_file.read_text())
    assert secrets["BOT_TOKEN"] == TOKEN
    assert secrets["MY_MODEL_KEY"] == KEY
    assert secrets["BOT_CONFIG"] == str(tmp_path / "conf/bot.toml")

    # the operator's next step: the written files, and nothing else, run the bot
    async with (
        FakeBotApi(TOKEN, username="team_helper_bot") as api,
        FakeOpenAIServer(model_name="fake-model") as llm,
    ):
        config_path = tmp_path / "conf/bot.toml"
        config_path.write_text(
            config_path.read_text().replace(
                str(config["providers"]["openai-compatible"]["base_url"]), llm.base_url
            )
        )
        data = tmp_path / "data"
        data.mkdir()
        bot = BotProcess(api, llm, data, **secrets)
        await bot.start(TELEGRAM_API_BASE=api.base_url)
        try:
            api.push_update(
                api.user_message(GROUP, {"id": 7, "first_name": "Alice"}, "@team_helper_bot hi")
            )
            await api.wait_for_call("sendMessage", 1, timeout=deadline(EVENT))
            assert api.sent_messages(GROUP)
        finally:
            assert await bot.stop() == 0


async def test_a_refused_token_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async with FakeBotApi(TOKEN) as api:
        monkeypatch.setenv("TELEGRAM_API_BASE", api.base_url)
        options = InitOptions(
            interactive=False,
            token="999:wrong",
            provider="ollama",
            config=tmp_path / "bot.toml",
            env_file=tmp_path / ".env",
        )
        assert await init(options) == 1
    out = capsys.readouterr().out
    assert "✘ BOT_TOKEN: refused" in out
    assert "Nothing was written" in out
    assert not (tmp_path / "bot.toml").exists()
    assert not (tmp_path / ".env").exists()


async def test_a_failing_model_call_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async with FakeBotApi(TOKEN) as api, FakeOpenAIServer() as llm:
        monkeypatch.setenv("TELEGRAM_API_BASE", api.base_url)
        monkeypatch.setenv("LLM_API_KEY", "sk-wrong")
        llm.fail_next(401, {"error": {"message": "Incorrect API key provided"}})
        options = InitOptions(
            interactive=False,
            token=TOKEN,
            provider="openai-compatible",
            base_url=llm.base_url,
            model="fake-model",
            config=tmp_path / "bot.toml",
            env_file=tmp_path / ".env",
        )
        assert await init(options) == 1
    out = capsys.readouterr().out
    assert "✘ model openai-compatible: fake-model" in out
    assert not (tmp_path / "bot.toml").exists()


async def test_running_it_again_edits_and_keeps_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "bot.toml"
    config.write_text(
        "# my notes about this bot\n"
        "owner_id = 5  # me\n"
        'bot_timezone = "UTC"\n'
        'workspace_rules_file = "AGENTS.md"\n'
        "\n"
        "[history]\n"
        "group_tokens = 9000  # tuned by hand\n"
        "\n"
        "[security]\n"
        "allowed_chats = [\n"
        "  -1001,  # the team\n"
        "]\n"
        "user_messages_per_minute = 30\n"
    )
    env_file = tmp_path / ".env"
    env_file.write_text(f"# mine\nBOT_TOKEN={TOKEN}\nOTHER_SECRET=keep-me\n")
    env_file.chmod(0o644)
    for name in ("BOT_TOKEN", "LLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    async with FakeBotApi(TOKEN) as api, FakeOpenAIServer() as llm:
        monkeypatch.setenv("TELEGRAM_API_BASE", api.base_url)
        monkeypatch.setenv("LLM_API_KEY", KEY)
        options = InitOptions(
            interactive=False,
            provider="openai-compatible",
            base_url=llm.base_url,
            model="fake-model",
            timezone="Europe/Berlin",
            locale="en",
            config=config,
            env_file=env_file,
        )
        assert await init(options) == 0
    text = config.read_text()
    assert text.startswith("# my notes about this bot\nowner_id = 5  # me\n")
    assert 'bot_timezone = "Europe/Berlin"\n' in text
    assert "group_tokens = 9000  # tuned by hand" in text
    assert "  -1001,  # the team\n" in text  # no --allow-chat: the list stays as written
    parsed = tomllib.loads(text)
    assert parsed["security"]["user_messages_per_minute"] == 30
    assert parsed["workspace_rules_file"] == "AGENTS.md"
    secrets = read_env(env_file.read_text())
    assert secrets["OTHER_SECRET"] == "keep-me"
    assert secrets["BOT_TOKEN"] == TOKEN
    assert secrets["LLM_API_KEY"] == KEY
    assert env_file.read_text().startswith("# mine\n")
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    load_settings(config)  # what it wrote loads


# ---------------------------------------------------------------- under a pseudo-terminal


class Terminal:
    """A child process on a pseudo-terminal (its controlling tty, so `getpass` works);
    `expect` waits for text on its screen, `send` types a line."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        pid, fd = pty.fork()
        if pid == 0:  # the child
            os.chdir(cwd)
            os.execve(sys.executable, [sys.executable, *argv], env)
        self.pid, self.fd = pid, fd
        self.screen = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._seen = 0
        self._data = asyncio.Event()
        asyncio.get_running_loop().add_reader(fd, self._read)

    def _read(self) -> None:
        try:
            chunk = os.read(self.fd, 4096)
        except OSError:  # the child closed the terminal
            chunk = b""
        if not chunk:
            asyncio.get_running_loop().remove_reader(self.fd)
        self.screen += self._decoder.decode(chunk)
        self._data.set()

    async def expect(self, text: str) -> None:
        give_up = asyncio.get_running_loop().time() + deadline(PROCESS_READY)
        while (at := self.screen.find(text, self._seen)) < 0:
            self._data.clear()
            left = give_up - asyncio.get_running_loop().time()
            try:
                await asyncio.wait_for(self._data.wait(), max(left, 0.01))
            except TimeoutError:
                raise AssertionError(f"never saw {text!r}; the screen:\n{self.screen}") from None
        self._seen = at + len(text)

    def send(self, line: str) -> None:
        os.write(self.fd, line.encode() + b"\r")

    async def exit_code(self) -> int:
        loop = asyncio.get_running_loop()
        _, status = await asyncio.wait_for(
            loop.run_in_executor(None, os.waitpid, self.pid, 0), deadline(REAP)
        )
        loop.remove_reader(self.fd)
        os.close(self.fd)
        return os.waitstatus_to_exitcode(status)


@asynccontextmanager
async def terminal(argv: list[str], env: dict[str, str], cwd: Path) -> AsyncIterator[Terminal]:
    screen = Terminal(argv, env, cwd)
    try:
        yield screen
    finally:
        try:
            os.kill(screen.pid, 9)
            await screen.exit_code()
        except (ProcessLookupError, ChildProcessError, OSError):
            pass


@pytest.mark.slow
async def test_init_through_its_prompts_in_a_terminal(tmp_path: Path) -> None:
    async with (
        FakeBotApi(TOKEN, username="team_helper_bot", reads_all_group_messages=True) as api,
        FakeOpenAIServer(model_name="fake-model") as llm,
    ):
        alice = {"id": OWNER, "first_name": "Alice", "username": "alice"}
        api.push_update(api.member_update(GROUP, alice, chat_title="Team chat"))
        api.push_update(api.member_update(-100999, alice, chat_title="Left already"))
        api.push_update(api.member_update(-100999, alice, old="member", new="kicked"))
        env = {**_base_env(tmp_path, api), "TERM": "dumb"}
        async with terminal(["-m", "bot.app.cli", "init"], env, tmp_path) as screen:
            await screen.expect("Bot token (hidden): ")
            screen.send(TOKEN)
            await screen.expect("✔ privacy mode is off")
            await screen.expect("Press Enter once sent")
            api.push_update(api.user_message(OWNER, alice, "/start", chat_type="private"))
            screen.send("")
            await screen.expect("Owner: Alice (@alice), id 1001 — is that you (Y/n): ")
            screen.send("y")
            await screen.expect(f"1) {GROUP}  Team chat")
            await screen.expect("empty: every chat): ")
            screen.send("1")
            await screen.expect("Provider (number or name) [deepseek]: ")
            screen.send("6")
            await screen.expect("Base URL: ")
            screen.send(llm.base_url)
            await screen.expect("Model: ")
            screen.send("fake-model")
            await screen.expect("LLM_API_KEY (the API key, hidden; empty: none): ")
            # a key the provider refuses: back to the key prompt, the other answers kept
            llm.fail_next(401, {"error": {"message": "Incorrect API key provided"}})
            screen.send("sk-mistyped")
            await screen.expect("✘ model openai-compatible: fake-model")
            await screen.expect("LLM_API_KEY (the API key, hidden; empty: none): ")
            screen.send(KEY)
            await screen.expect("✔ model openai-compatible: fake-model")
            await screen.expect("Time zone (IANA name)")
            screen.send("Europe/Berlin")
            await screen.expect("Language (auto: each member's own, zh or en; zh; en) [auto]: ")
            screen.send("en")
            await screen.expect("Wrote bot.toml (mode 0644")
            assert await screen.exit_code() == 0
    assert TOKEN not in screen.screen
    assert KEY not in screen.screen
    assert "Left already" not in screen.screen
    config = tomllib.loads((tmp_path / "bot.toml").read_text())
    assert config["owner_id"] == OWNER
    assert config["security"]["allowed_chats"] == [GROUP]
    assert config["bot_timezone"] == "Europe/Berlin"
    assert read_env((tmp_path / ".env").read_text())["LLM_API_KEY"] == KEY


async def test_updates_read_elsewhere_still_let_it_set_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async with FakeBotApi(TOKEN) as api, FakeOpenAIServer() as llm:
        api.webhook_url = "https://bot.example.com/webhook"  # getUpdates answers 409
        monkeypatch.setenv("TELEGRAM_API_BASE", api.base_url)
        monkeypatch.setenv("LLM_API_KEY", KEY)
        options = InitOptions(
            interactive=False,
            token=TOKEN,
            provider="openai-compatible",
            base_url=llm.base_url,
            model="fake-model",
            owner_id=OWNER,
            timezone="UTC",
            locale="auto",
            config=tmp_path / "bot.toml",
            env_file=tmp_path / ".env",
        )
        assert await init(options) == 0
    out = capsys.readouterr().out
    assert "✘ getUpdates: Telegram refused" in out
    assert tomllib.loads((tmp_path / "bot.toml").read_text())["owner_id"] == OWNER
    load_settings(tmp_path / "bot.toml")

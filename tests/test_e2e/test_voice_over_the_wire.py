"""Voice notes through `tgbot run`, with a fake OpenAI-compatible transcription server: a
voice note that replies to the bot is transcribed once, before it is stored; the transcript
is in that turn and every later one, byte for byte; the ledger has the call with its cost."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.llm.scripted import ScriptedModel
from bot.agent.ledger_read import read_entries
from bot.ports import LLMRequest, LLMResponse
from testkit.fake_transcription import FakeTranscriptionServer
from tests.bot_process import QUIET_CONFIG, StartBot, eventually, reply_stored

pytestmark = pytest.mark.slow

CHAT = -1007770004
ALICE = {"id": 1001, "first_name": "Alice"}
AUDIO = b"OggS\x00\x02fake-opus-audio"


def current(request: LLMRequest) -> str:
    return next(m.content for m in reversed(request.messages) if m.role == "user")


async def test_a_voice_reply_to_the_bot_is_transcribed_once(
    bot_running: StartBot, tmp_path: Path
) -> None:
    model = ScriptedModel(default=lambda _r: LLMResponse(text="noted"))
    async with FakeTranscriptionServer() as speech:
        speech.say(AUDIO, "see you at noon by the east gate", seconds=12)
        config = (
            QUIET_CONFIG
            + f'\n[transcription]\nbase_url = "{speech.base_url}"\napi_key_env = "SPEECH_KEY"\n'
            + "price_per_minute = 0.006\n"
        )
        api, _llm, bot, store = await bot_running(
            model, config=config, BOT_LOCALE="en", SPEECH_KEY="sk-speech-secret"
        )
        api.push_update(api.user_message(CHAT, ALICE, "@test_bot when do we meet?"))
        await reply_stored(api, store, CHAT, 1)
        bot_message = api.sent_messages(CHAT)[0]["message_id"]
        api.push_update(
            api.media_message(
                CHAT, ALICE, "", kind="voice", data=AUDIO, file_id="AwAD-voice",
                duration=12, reply_to=bot_message,
            )
        )  # fmt: skip
        await reply_stored(api, store, CHAT, 2)
        api.push_update(api.user_message(CHAT, ALICE, "@test_bot thanks"))
        await reply_stored(api, store, CHAT, 3)
        await bot.stop()

    spoken = "[voice 12s] see you at noon by the east gate"
    voice_turn, later = model.requests[1], model.requests[2]
    assert spoken in current(voice_turn)
    voice_as_history = current(voice_turn).partition("\n\n[Turn context]")[0]
    assert voice_as_history in [m.content for m in later.messages]  # byte for byte
    assert len(speech.calls) == 1  # once, when stored
    assert speech.calls[0]["authorization"] == "Bearer sk-speech-secret"
    (line,) = [e for e in read_entries(tmp_path / "agent-traces") if e.purpose == "transcription"]
    assert (line.model, line.error, line.cost) == ("whisper-1", None, pytest.approx(0.0012))
    assert "sk-speech-secret" not in (tmp_path / "bot.log").read_text(encoding="utf-8")


async def test_transcription_is_priced_as_billed_and_held_to_the_spend_limits(
    bot_running: StartBot, tmp_path: Path
) -> None:
    """Issue 50, item 2: a note declared as 1 s that the endpoint bills as 3,600 s is
    ledgered at 0.36, not 0.0001, and counts toward Alice's daily budget; once it is spent,
    her next voice note is neither downloaded nor transcribed, nor is her photo downloaded."""
    model = ScriptedModel(default=lambda _r: LLMResponse(text="noted"))
    long_note, next_note = b"OggS\x00\x02an-hour-long", b"OggS\x00\x02one-more"
    async with FakeTranscriptionServer() as speech:
        speech.say(long_note, "a very long story", seconds=3600)
        speech.say(next_note, "and one more thing", seconds=2)
        config = (
            QUIET_CONFIG
            + f'\n[transcription]\nbase_url = "{speech.base_url}"\n'
            + "price_per_minute = 0.006\n"
            + "\n[limits]\nmember_daily_cost = 0.01\n"
        )
        api, _llm, bot, store = await bot_running(
            model, config=config, BOT_LOCALE="en", LLM_VISION="true"
        )
        api.push_update(api.user_message(CHAT, ALICE, "@test_bot listen to this"))
        await reply_stored(api, store, CHAT, 1)
        bot_message = api.sent_messages(CHAT)[0]["message_id"]
        for mid, audio, file_id in ((801, long_note, "AwAD-long"), (802, next_note, "AwAD-next")):
            api.push_update(
                api.media_message(
                    CHAT, ALICE, "", kind="voice", data=audio, file_id=file_id,
                    duration=1, reply_to=bot_message, message_id=mid,
                )
            )  # fmt: skip

            async def stored(mid: int = mid) -> bool:
                return await store.find_platform_message(CHAT, mid) is not None

            await eventually(stored)
        # over budget, a photo is not downloaded either (for the turn, or ahead of it)
        api.push_update(
            api.media_message(
                CHAT, ALICE, "@test_bot and this?", kind="photo", data=b"\xff\xd8not-fetched",
                file_id="AgAD-photo", width=64, height=48, message_id=803,
            )
        )  # fmt: skip

        async def photo_stored() -> bool:
            return await store.find_platform_message(CHAT, 803) is not None

        await eventually(photo_stored)
        await bot.stop()

    assert [d for d in api.downloads if d.endswith("AgAD-photo")] == []
    lines = [e for e in read_entries(tmp_path / "agent-traces") if e.purpose == "transcription"]
    assert [line.cost for line in lines] == [pytest.approx(0.36)]
    assert len(speech.calls) == 1
    assert [d for d in api.downloads if d.endswith("AwAD-next")] == []

"""Members' photos through `tgbot run` against the fake Bot API (with `getFile` and file
downloads): the model sees the current turn's images, the history never keeps them.

A member posts a photo whose caption mentions the bot. With `LLM_VISION=true` the request
carries the image (downloaded, verified, downscaled to OpenAI's bounds, cached 0600 under
`DATA_DIR/media/`), the reply is delivered, and the next turn repeats the photo's message
byte for byte with its placeholder only. With vision off no file is downloaded, no image
byte is sent, and the model is told it cannot see the image.
"""

from __future__ import annotations

import base64
import io
import stat
import struct
import zlib
from pathlib import Path

import pytest
from PIL import Image

from adapters.llm.scripted import ScriptedModel
from bot.agent.ledger_read import read_entries
from bot.agent.trace_reader import read_trace
from bot.app.dashboard.calls import view
from bot.ports import LLMRequest, LLMResponse
from tests.bot_process import QUIET_CONFIG, StartBot, reply_stored

pytestmark = pytest.mark.slow

CHAT = -1007770001
ALICE = {"id": 1001, "first_name": "Alice"}


def photo_bytes(width: int, height: int) -> bytes:
    image = Image.new("RGB", (width, height), (200, 40, 40))
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=90)
    return out.getvalue()


def current(request: LLMRequest) -> int:
    return max(i for i, m in enumerate(request.messages) if m.role == "user")


def echo(_request: LLMRequest) -> LLMResponse:
    return LLMResponse(text="a red square")


async def test_the_model_sees_the_photo_of_this_turn_only(
    bot_running: StartBot, tmp_path: Path
) -> None:
    model = ScriptedModel(default=echo)
    api, _llm, _bot, store = await bot_running(model, LLM_VISION="true")
    api.push_update(
        api.media_message(
            CHAT,
            ALICE,
            "@test_bot what is in this picture?",
            kind="photo",
            data=photo_bytes(2560, 1920),
            file_id="AgAD-big-photo",
            width=2560,
            height=1920,
            message_id=500,
        )
    )
    await reply_stored(api, store, CHAT, 1)

    first = model.requests[0]
    photo = first.messages[current(first)]
    (image,) = photo.images
    media_type, _, data = image.url.removeprefix("data:").partition(";base64,")
    assert media_type == "image/jpeg"
    with Image.open(io.BytesIO(base64.b64decode(data))) as sent:
        assert sent.size == (1024, 768)  # OpenAI's high-detail size: nothing wasted
    assert "[Images]\n- m1: attached below (1024x768)" in photo.content
    assert "[photo]" in photo.content  # the placeholder stays in the text (Alice writes in English)
    assert api.calls_of("getFile")[0]["file_id"] == "AgAD-big-photo"
    (cached,) = (tmp_path / "media").iterdir()
    assert stat.S_IMODE(cached.stat().st_mode) == 0o600

    api.push_update(api.user_message(CHAT, ALICE, "@test_bot thanks!", message_id=502))
    await reply_stored(api, store, CHAT, 2)
    second = model.requests[1]
    again = second.messages[1]
    assert again.images == ()
    stored_form = photo.content.partition("\n\n[Turn context]")[0]
    assert again.content == stored_form  # byte for byte: the cached prefix holds
    reply = second.messages[2]
    assert reply.role == "assistant"
    assert reply.content.endswith("a red square")
    assert all(not m.images for m in second.messages)
    assert len(api.downloads) == 1  # the photo was fetched once

    # accounting: the ledger counts the image at OpenAI's rule (2x2 tiles: 85 + 4 x 170)
    await _bot.stop()
    first_line, second_line = [
        e for e in read_entries(tmp_path / "agent-traces") if e.purpose == "turn"
    ]
    assert (first_line.images, first_line.est_images) == (1, 765)
    assert (second_line.images, second_line.est_images) == (0, 0)
    trace = read_trace(tmp_path / "agent-traces", first_line.call_id)
    assert trace is not None
    rows = [row for m in view(trace)["messages"] for row in m["image_rows"]]
    assert [(r["label"], r["width"], r["height"], r["tokens"]) for r in rows] == [
        ("m1", 1024, 768, 765)
    ]
    assert rows[0]["thumbnail"].startswith("data:image/jpeg;base64,")


async def test_without_vision_no_image_byte_is_sent(bot_running: StartBot) -> None:
    model = ScriptedModel(default=echo)
    api, _llm, _bot, store = await bot_running(model)  # vision is off by default
    api.push_update(
        api.media_message(
            CHAT,
            ALICE,
            "@test_bot what is in this picture?",
            kind="photo",
            data=photo_bytes(640, 480),
            file_id="AgAD-small-photo",
            width=640,
            height=480,
        )
    )
    await reply_stored(api, store, CHAT, 1)
    (request,) = model.requests
    assert all(not m.images for m in request.messages)
    text = request.messages[current(request)].content
    assert "[Images]\nThis model cannot see images here: m1 cannot be shown to you." in text
    assert api.calls_of("getFile") == []
    assert api.downloads == []


def pixel_bomb() -> bytes:
    """A small PNG whose header declares 30000 x 30000 pixels."""
    out = io.BytesIO()
    Image.new("L", (1, 1)).save(out, format="PNG")
    small = out.getvalue()
    header = struct.pack(">IIBBBBB", 30000, 30000, 8, 0, 0, 0, 0)
    chunk = b"IHDR" + header
    ihdr = struct.pack(">I", len(header)) + chunk + struct.pack(">I", zlib.crc32(chunk))
    return small[:8] + ihdr + small[8 + 25 :]


async def test_a_hostile_or_stalled_image_is_skipped_and_the_turn_answered(
    bot_running: StartBot,
) -> None:
    model = ScriptedModel(default=echo)
    config = QUIET_CONFIG + "\n[media]\ndownload_timeout_seconds = 1\n"
    api, _llm, _bot, store = await bot_running(model, config=config, LLM_VISION="true")
    api.delay_next("file", 3600)  # the first download never finishes
    api.push_update(
        api.media_message(
            CHAT, ALICE, "@test_bot look", kind="photo", data=photo_bytes(64, 64),
            file_id="AgAD-stalls", width=64, height=64,
        )
    )  # fmt: skip
    await reply_stored(api, store, CHAT, 1)
    api.push_update(
        api.media_message(
            CHAT, ALICE, "@test_bot and this?", kind="photo", data=pixel_bomb(),
            file_id="AgAD-bomb", width=1280, height=960,
        )
    )  # fmt: skip
    await reply_stored(api, store, CHAT, 2)
    stalled, bomb = model.requests
    assert all(not m.images for m in (*stalled.messages, *bomb.messages))
    assert "- m1: not attached: the download did not finish within 1 s" in (
        stalled.messages[current(stalled)].content
    )
    assert "not attached: the image is too large to decode (a decompression bomb?)" in (
        bomb.messages[current(bomb)].content
    )
    assert [m["text"] for m in api.sent_messages(CHAT)] == ["a red square", "a red square"]

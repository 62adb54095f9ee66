"""`view_image` through `tgbot run`, on the OpenAI and the Anthropic wire: "what was in m1?"
about an older photo. The alias reaches the tool as the photo's real message id, the file
is fetched with its real file id, and the image reaches the model in that turn only: inside
the tool result (Anthropic), on a user message after the tool results (chat completions).
The next turn shows the stored line `[image m1 viewed]` and no image.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from PIL import Image

from adapters.llm.scripted import CallTool, Reply, ScriptedModel
from bot.ports import LLMRequest, LLMResponse
from storage.sql import SqlStore
from testkit.fake_anthropic import FakeAnthropicServer
from testkit.fake_bot_api import FakeBotApi
from testkit.fake_server import FakeOpenAIServer
from tests.bot_process import (
    QUIET_CONFIG,
    eventually,
    process_running,
    reply_stored,
    sqlite_store,
)

pytestmark = pytest.mark.slow

CHAT = -1007770002
ALICE = {"id": 1001, "first_name": "Alice"}
BOB = {"id": 1002, "first_name": "Bob"}


def photo_bytes() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (1280, 960), (30, 90, 200)).save(out, format="JPEG")
    return out.getvalue()


@asynccontextmanager
async def running(
    tmp_path: Path, wire: str, model: ScriptedModel
) -> AsyncIterator[tuple[FakeBotApi, SqlStore]]:
    config = tmp_path / "bot.toml"
    config.write_text(QUIET_CONFIG, encoding="utf-8")
    server = FakeAnthropicServer(model) if wire == "anthropic" else FakeOpenAIServer(model)
    async with (
        FakeBotApi(username="test_bot") as api,
        server as llm,
        process_running(
            api,
            llm,
            tmp_path,
            LLM_API_KEY="sk-test",
            LLM_MODEL="fake-model",
            LLM_KIND=wire,
            LLM_VISION="true",
            BOT_CONFIG=str(config),
        ),
        sqlite_store(tmp_path) as store,
    ):
        yield api, store


def _images(request: LLMRequest) -> list[tuple[str, str, int]]:
    return [
        (m.role, image.url[:23], i) for i, m in enumerate(request.messages) for image in m.images
    ]


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
async def test_the_model_views_an_older_photo_by_its_alias(tmp_path: Path, wire: str) -> None:
    model = ScriptedModel(default=lambda _r: LLMResponse(text="ok"))
    async with running(tmp_path, wire, model) as (api, store):
        api.push_update(
            api.media_message(
                CHAT, ALICE, "", kind="photo", data=photo_bytes(), file_id="AgAD-old",
                width=1280, height=960, message_id=700,
            )
        )  # fmt: skip
        api.push_update(api.user_message(CHAT, BOB, "nice", message_id=701))
        model.add(CallTool("view_image", {"reference": "m1"}), Reply("a blue photo"))
        api.push_update(api.user_message(CHAT, BOB, "@test_bot what was in m1?", message_id=702))
        await reply_stored(api, store, CHAT, 1)
        model.add(Reply("you're welcome"))
        api.push_update(api.user_message(CHAT, BOB, "@test_bot thanks", message_id=704))
        await reply_stored(api, store, CHAT, 2)

    first, with_image, later = model.requests
    assert _images(first) == []  # an older photo: only its placeholder
    assert api.calls_of("getFile")[0]["file_id"] == "AgAD-old"
    tool = next(m for m in with_image.messages if m.role == "tool")
    size = {"openai": "1024x768", "anthropic": "1260x945"}[wire]  # each provider's bounds
    assert tool.content == f"[image m1 viewed] ({size}, attached)"
    found = _images(with_image)
    tool_index = with_image.messages.index(tool)
    if wire == "anthropic":  # inside the tool result
        assert found == [("tool", "data:image/jpeg;base64,", tool_index)]
    else:  # on a user message right after the tool results
        carrier = with_image.messages[tool_index + 1]
        assert carrier.content == "[Images from tool results] m1"
        assert found == [("user", "data:image/jpeg;base64,", tool_index + 1)]
    stored = next(m for m in later.messages if m.role == "tool")
    assert stored.content == "[image m1 viewed]"
    assert _images(later) == []
    assert [m["text"] for m in api.sent_messages(CHAT)] == ["a blue photo", "you're welcome"]


async def test_a_message_of_another_chat_is_not_viewed(tmp_path: Path) -> None:
    other_chat = -1007770099
    model = ScriptedModel(default=lambda _r: LLMResponse(text="ok"))
    async with running(tmp_path, "openai", model) as (api, store):
        api.push_update(
            api.media_message(
                other_chat, ALICE, "", kind="photo", data=photo_bytes(), file_id="AgAD-theirs",
                width=1280, height=960, message_id=800,
            )
        )  # fmt: skip

        async def stored() -> bool:
            return await store.find_platform_message(other_chat, 800) is not None

        await eventually(stored)
        model.add(CallTool("view_image", {"reference": "800"}), Reply("cannot"))
        api.push_update(api.user_message(CHAT, BOB, "@test_bot show 800", message_id=801))
        await reply_stored(api, store, CHAT, 1)
    result = next(m for m in model.requests[1].messages if m.role == "tool")
    assert result.content.startswith("error[reference_not_confirmed]"), result.content
    assert api.calls_of("getFile") == []

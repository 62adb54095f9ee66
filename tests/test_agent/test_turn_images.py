"""The current turn's images: which messages they come from (the trigger, its burst, the
message it quotes), at most `max_images_per_turn` newest first with the rest named, and
never in a later turn's request."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from adapters.llm.scripted import Reply, ScriptedModel
from bot.app.wiring import App
from bot.context.images import ImageBounds, fitted_size
from bot.domain.facts import Media, Quote
from bot.errors import MediaRefused
from bot.ports import DocumentText, FetchedImage, LLMRequest
from tests.fakes import RecordingMessenger, SteppingClock, inbound
from tests.test_agent.rig import CHAT, make_app


class FakeFiles:
    """Images by file id, sized as asked; an unknown id is refused."""

    def __init__(self, sizes: dict[str, tuple[int, int]]) -> None:
        self.sizes = sizes
        self.asked: list[str] = []

    async def image(self, media: Media, bounds: ImageBounds) -> FetchedImage:
        self.asked.append(media.file_id or "")
        if media.file_id not in self.sizes:
            raise MediaRefused("the file is not a readable image (truncated or damaged)")
        width, height = fitted_size(*self.sizes[media.file_id], bounds)
        return FetchedImage(
            media_type="image/jpeg", data=b"\xff\xd8jpeg", width=width, height=height
        )

    async def text(self, media: Media, *, page: int | None, max_chars: int) -> DocumentText:
        raise MediaRefused("no documents here")

    async def file(self, media: Media) -> bytes:
        raise MediaRefused("no files here")

    async def prepare(self, raw: bytes, bounds: ImageBounds) -> FetchedImage:
        raise MediaRefused("no tool images here")

    def prefetch(self, media: Media) -> None:
        return None


def photo(file_id: str) -> tuple[Media, ...]:
    return (Media(kind="photo", file_id=file_id, width=1280, height=960),)


async def post(app: App, clock: SteppingClock, mid: int, text: str, **facts: object) -> None:
    clock.advance(40)
    message = inbound(message_id=mid, text=text, at=clock.now(), chat_id=CHAT)
    await app.inbound.on_message(dataclasses.replace(message, **facts))  # type: ignore[arg-type]
    await app.inbound.drain()


def current(request: LLMRequest) -> int:
    return max(i for i, m in enumerate(request.messages) if m.role == "user")


def vision_app(
    tmp_path: Path, model: ScriptedModel, files: FakeFiles, *, per_turn: int = 4
) -> tuple[App, SteppingClock]:
    app, _store, clock = make_app(tmp_path, model, RecordingMessenger(), llm_vision=True)
    images = app.runner.request.images
    assert images is not None
    images.files = files
    images.max_per_turn = per_turn
    return app, clock


async def test_a_reply_to_a_photo_shows_the_quoted_photo(tmp_path: Path) -> None:
    files = FakeFiles({"old": (1280, 960)})
    model = ScriptedModel([Reply("a cat")])
    app, clock = vision_app(tmp_path, model, files)
    await post(app, clock, 501, "", media=photo("old"))
    quote = Quote(id=501, summary="[图片]", chat_id=CHAT)
    await post(app, clock, 502, "@Helper what is this?", mentions_bot=True, quote=quote)

    (request,) = model.requests
    message = request.messages[current(request)]
    assert [(i.label, i.width, i.height, i.tokens) for i in message.images] == [
        ("m1", 1024, 768, 765)
    ]
    assert "- m1 (quoted): attached below (1024x768)" in message.content


async def test_over_the_cap_the_newest_go_and_the_rest_are_named(tmp_path: Path) -> None:
    files = FakeFiles({"new": (800, 600), "old": (800, 600)})
    model = ScriptedModel([Reply("two photos"), Reply("ok")])
    app, clock = vision_app(tmp_path, model, files, per_turn=1)
    await post(app, clock, 501, "", media=photo("old"))
    quote = Quote(id=501, summary="[图片]", chat_id=CHAT)
    await post(
        app, clock, 502, "@Helper compare", mentions_bot=True, quote=quote, media=photo("new")
    )
    await post(app, clock, 503, "@Helper thanks", mentions_bot=True)

    first, later = model.requests
    message = first.messages[current(first)]
    assert [i.label for i in message.images] == ["m2"]  # the trigger's own photo first
    assert "- m2: attached below (800x600)" in message.content
    assert (
        "- m1 (quoted): not attached: over the 1 images a turn shows; view_image shows it"
        in message.content
    )
    assert files.asked == ["new"]
    assert all(not m.images for m in later.messages)
    assert all("[Images]" not in m.content for m in later.messages)


async def test_a_refused_image_is_named_with_its_reason(tmp_path: Path) -> None:
    model = ScriptedModel([Reply("sorry")])
    app, clock = vision_app(tmp_path, model, FakeFiles({}))
    await post(app, clock, 501, "@Helper look", mentions_bot=True, media=photo("broken"))
    (request,) = model.requests
    message = request.messages[current(request)]
    assert message.images == ()
    assert "- m1: not attached: the file is not a readable image" in message.content

"""Tools from MCP servers, bot side: names, schemas, rights when they run, aliases, results.

The server is a fake `McpCalls` that records each call (the real servers are in
tests/test_e2e/test_mcp_over_the_wire.py)."""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from PIL import Image

from adapters.media_files import prepare_image
from bot.agent.chat_scope import offered_in
from bot.agent.tool_runner import ToolRunner
from bot.context.alias_table import AliasTable
from bot.context.images import ImageBounds
from bot.domain.ids import Scene, SessionKey
from bot.domain.messages import ToolCall
from bot.ports import DocumentText, FetchedImage, SessionInfo
from bot.tools.base import Tool, ToolContext, ToolMedia
from bot.tools.mcp import (
    ListedTool,
    McpAccess,
    McpContent,
    McpResult,
    offered_name,
    render_result,
    server_tools,
    show_images,
)
from bot.tools.rights import MemberRights
from testkit.memory_store import InMemoryStore
from tests.fakes import RecordingMessenger, SteppingClock
from tests.test_agent.rig import START

OWNER = 42
ALICE = 1001
GROUP = -100500


@dataclass
class FakeServer:
    """Answers every call with `answer` and records (server, tool, arguments)."""

    answer: McpResult = field(
        default_factory=lambda: McpResult(content=(McpContent(kind="text", text="ok"),))
    )
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)

    async def call_tool(
        self, server: str, tool: str, arguments: dict[str, Any], *, within: float
    ) -> McpResult:
        self.calls.append((server, tool, arguments))
        return self.answer


LISTED = (
    ListedTool(name="zeta", description="Last   one.", input_schema={"type": "object"}),
    ListedTool(
        name="quote",
        description="Quote a message.",
        input_schema={
            "type": "object",
            "properties": {
                "message": {"type": "string", "x-message-reference": True},
                "message_id": {"type": "string", "description": "an e-mail's id"},
                "note": {"type": "integer"},
            },
        },
    ),
    ListedTool(name="a.b/c", description="", input_schema={}),
)


def tools(fake: FakeServer, **kw: Any) -> dict[str, Tool]:
    access = kw.pop("access", McpAccess(owner_id=OWNER))
    return {t.spec.name: t for t in server_tools("srv", LISTED, calls=fake, access=access, **kw)}


def test_tools_are_named_sorted_and_filtered() -> None:
    fake = FakeServer()
    assert list(tools(fake)) == ["srv__a_b_c", "srv__quote", "srv__zeta"]
    assert list(tools(fake, allow=["zeta", "quote"], deny=["quote"])) == ["srv__zeta"]
    assert offered_name("s" * 40, "t" * 40) == ("s" * 40 + "__" + "t" * 40)[:64]
    zeta = tools(fake)["srv__zeta"]
    assert zeta.spec.description == "[srv] Last one."
    assert zeta.origin == "srv"


def test_a_marked_parameter_takes_an_alias_and_the_marker_is_not_sent() -> None:
    quote = tools(FakeServer())["srv__quote"]
    properties = quote.spec.parameters["properties"]
    assert "x-message-reference" not in repr(quote.spec.parameters)
    assert properties["message"]["description"] == "A message alias you were shown (m12)."
    assert quote.reference_params == frozenset({"message"})
    configured = tools(FakeServer(), reference_params=["note"])["srv__quote"]
    assert configured.reference_params == frozenset({"message", "note"})


def test_the_schema_is_a_private_copy() -> None:
    """A server object changed after the listing cannot change the bytes the model is sent."""
    schema: dict[str, Any] = {"type": "object", "properties": {"x": {"type": "string"}}}
    (tool,) = server_tools(
        "srv",
        [ListedTool(name="t", description="d", input_schema=schema)],
        calls=FakeServer(),
        access=McpAccess(),
    )
    schema["properties"]["x"]["type"] = "integer"
    assert tool.spec.parameters["properties"]["x"]["type"] == "string"


@pytest.mark.parametrize(
    ("access", "offered"),
    [
        (McpAccess(owner_id=OWNER), {"owner"}),
        (McpAccess(scenes=frozenset({"group"}), owner_id=OWNER), {"group"}),
        (McpAccess(chats=frozenset({GROUP, 7}), owner_id=OWNER), {"group", "private"}),
    ],
    ids=["default: the owner's chat", "scenes", "chats: their scenes"],
)
def test_tools_are_offered_per_scene(access: McpAccess, offered: set[Scene]) -> None:
    table = tools(FakeServer(), access=access)
    for scene in ("group", "private", "owner"):
        names = offered_in(table, scene)
        assert bool(names) == (scene in offered)


def runner(table: dict[str, Tool], messenger: RecordingMessenger) -> ToolRunner:
    store = InMemoryStore()
    return ToolRunner(
        tools=table,
        store=store,
        platform_messages=store,
        messenger=messenger,
        clock=SteppingClock(START),
        bot_id=1,
        bot_name="bot",
        max_result_chars=50,
        owner_id=OWNER,
    )


def context(run: ToolRunner, chat_id: int, scene: Scene, requester: int | None) -> ToolContext:
    session = SessionInfo(id=1, key=SessionKey(chat_id=chat_id), scene=scene)
    rights = MemberRights(requester_id=requester, owner_id=OWNER, bot_id=1, admins=run.admins)
    return replace(run.context(session, []), rights=rights)


async def call(
    run: ToolRunner, name: str, arguments: str, ctx: ToolContext, aliases: AliasTable | None = None
) -> str:
    result = await run.run(
        ToolCall(id="c1", name=name, arguments=arguments), aliases or AliasTable(), ctx
    )
    return f"error[{result.error_code}]: {result.content}" if result.is_error else result.content


@pytest.mark.parametrize(
    ("members", "chat", "scene", "requester", "expected"),
    [
        ("owner", OWNER, "owner", OWNER, "ok"),
        ("owner", GROUP, "group", ALICE, "error[not_allowed]: not allowed: only the bot's owner"),
        ("owner", GROUP, "group", OWNER, "ok"),
        ("anyone", GROUP, "group", ALICE, "ok"),
        ("admins", GROUP, "group", ALICE, "ok"),
        ("admins", GROUP, "group", 1002, "error[not_allowed]: not allowed: only the owner or"),
        ("anyone", 7, "private", 7, "error[unknown_tool]: there is no tool named 'srv__zeta'"),
    ],
    ids=[
        "owner in the owner chat",
        "a member in a group: owner-only",
        "the owner in a group",
        "anyone",
        "an administrator",
        "not an administrator",
        "a scene that is not offered them",
    ],
)
async def test_rights_are_checked_when_the_tool_runs(
    members: str, chat: int, scene: Scene, requester: int, expected: str
) -> None:
    fake = FakeServer()
    access = McpAccess(scenes=frozenset({"owner", "group"}), members=members, owner_id=OWNER)  # type: ignore[arg-type]
    messenger = RecordingMessenger()
    messenger.admins = {GROUP: {ALICE}}
    run = runner(tools(fake, access=access), messenger)
    answer = await call(run, "srv__zeta", "{}", context(run, chat, scene, requester))
    assert answer.startswith(expected)
    assert len(fake.calls) == (1 if expected == "ok" else 0)


async def test_only_declared_references_are_rewritten() -> None:
    fake = FakeServer()
    run = runner(tools(fake), RecordingMessenger())
    aliases = AliasTable()
    aliases.register("m3", 5003)
    ctx = context(run, OWNER, "owner", OWNER)
    args = '{"message": "m3", "message_id": "m3", "note": 1}'
    assert await call(run, "srv__quote", args, ctx, aliases) == "ok"
    # the declared parameter became the platform id, in the type the server declared; the
    # e-mail id that happens to be called `message_id` reached the server as written
    assert fake.calls == [("srv", "quote", {"message": "5003", "message_id": "m3", "note": 1})]
    refused = await call(run, "srv__quote", '{"message": "m9"}', ctx, aliases)
    assert refused.startswith("error[reference_not_confirmed]")
    assert len(fake.calls) == 1


async def test_results_are_capped_and_a_server_error_is_a_tool_error() -> None:
    long = FakeServer(answer=McpResult(content=(McpContent(kind="text", text="x" * 500),)))
    run = runner(tools(long), RecordingMessenger())
    ctx = context(run, OWNER, "owner", OWNER)
    assert len(await call(run, "srv__zeta", "{}", ctx)) < 120  # the record-time cap (50)
    failing = FakeServer(
        answer=McpResult(content=(McpContent(kind="text", text="no such city"),), is_error=True)
    )
    run = runner(tools(failing), RecordingMessenger())
    assert await call(run, "srv__zeta", "{}", ctx) == "error[server_error]: no such city"


def test_an_image_is_a_line_and_structured_content_stands_in_for_no_text() -> None:
    picture = McpResult(
        content=(
            McpContent(kind="text", text="here:"),
            McpContent(kind="image", mime_type="image/png", size=2048),
        )
    )
    assert render_result(picture) == "here:\n[image image/png, 2.0 KB]"
    assert render_result(McpResult(content=(), structured='{"a": 1}')) == '{"a": 1}'


class ToolImages:
    """Only what `show_images` uses of `MediaFiles`: the real check and downscale."""

    async def prepare(self, raw: bytes, bounds: ImageBounds) -> FetchedImage:
        return prepare_image(raw, bounds)

    async def image(self, media: Any, bounds: ImageBounds) -> FetchedImage:
        raise AssertionError("a tool's image is never fetched from Telegram")

    async def text(self, media: Any, *, page: int | None, max_chars: int) -> DocumentText:
        raise AssertionError("unused")

    async def file(self, media: Any) -> bytes:
        raise AssertionError("unused")

    def prefetch(self, media: Any) -> None:
        raise AssertionError("unused")


def png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 30)).save(out, format="PNG")
    return out.getvalue()


async def test_a_seeing_model_is_shown_a_tools_image_and_told_why_when_not() -> None:
    """An image in a server's result rides on this turn's request, checked and downscaled
    like a member's photo (within Anthropic's bounds, aspect kept); a damaged one is
    named with the reason; a model that cannot see gets the line alone."""
    result = McpResult(
        content=(
            McpContent(kind="image", mime_type="image/png", size=10, data=png(3000, 1500)),
            McpContent(kind="image", mime_type="image/png", size=10, data=b"\x89PNG broken"),
        )
    )
    run = runner(tools(FakeServer()), RecordingMessenger())
    media = ToolMedia(files=ToolImages(), wire="anthropic", vision=True)
    ctx = replace(context(run, OWNER, "owner", OWNER), media=media)
    refused = await show_images(result, ctx, label="srv__zeta")
    (image,) = media.shown
    assert image.label == "srv__zeta"
    assert max(image.width, image.height) <= 1568
    assert image.width * image.height <= 1_192_464  # about 1.15 megapixels
    assert image.width == 2 * image.height
    assert image.tokens == math.ceil(image.width * image.height / 750)
    assert image.url.startswith("data:image/jpeg;base64,")
    line = render_result(result, shown=refused)
    assert line.splitlines()[0] == "[image image/png, 10 bytes]"
    assert line.splitlines()[1].startswith("[image image/png, 10 bytes: not shown: ")

    blind = ToolMedia(files=ToolImages(), wire="openai", vision=False)
    assert await show_images(result, replace(ctx, media=blind), label="srv__zeta") == {}
    assert blind.shown == []

"""The aiogram `Bot` for a Bot API base URL, over an HTTP session that sends a request
without files as an url-encoded body and closes plain HTTP at once (`build_bot`)."""

from __future__ import annotations

from typing import Any, cast
from urllib.parse import urlencode

from aiogram import Bot
from aiogram.client.default import DefaultBotProperties
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from aiogram.exceptions import TelegramNetworkError
from aiogram.methods import (
    DeleteMessage,
    DeleteWebhook,
    EditMessageText,
    GetMe,
    GetUpdates,
    SendChatAction,
    SendMessage,
    SendMessageDraft,
    SendPhoto,
    SetMessageReaction,
    SetWebhook,
)
from aiogram.methods.base import Response, TelegramMethod, TelegramType
from aiogram.types import InputFile
from aiohttp import ClientError, ClientTimeout
from aiohttp.payload import BytesPayload

# aiogram reads every reply through `Response[method.__returning__]`, and pydantic keeps
# parametrised models only weakly: once a collection frees one, the next reply rebuilds it
# (about 6 ms of schema building, a fifth of the event loop's time under load). Holding
# the models of the methods we call keeps them built.
_RESPONSE_MODELS = tuple(
    Response[method.__returning__]  # type: ignore[name-defined]
    for method in (
        DeleteMessage,
        DeleteWebhook,
        EditMessageText,
        GetMe,
        GetUpdates,
        SendMessage,
        SendMessageDraft,
        SendChatAction,
        SendPhoto,
        SetMessageReaction,
        SetWebhook,
    )
)


class _BotSession(AiohttpSession):
    """aiogram's HTTP session, with two savings.

    A request without files goes as an url-encoded body built here: aiogram's `FormData`
    builds a multipart writer for every request (a fresh random boundary, one `getrandom`
    system call) that only a request carrying files uses. The fields and their encoding are
    aiogram's own (`prepare_value`); a request with files goes through aiogram unchanged.

    Closing one that spoke plain HTTP (a local Bot API server, the fake one on 127.0.0.1)
    skips the 250 ms aiogram waits for SSL connections to wind down: there are none."""

    def __init__(self, api_base: str) -> None:
        super().__init__(api=TelegramAPIServer.from_base(api_base))
        self._plain_http = api_base.startswith("http://")

    def _body(self, bot: Bot, method: TelegramMethod[Any]) -> BytesPayload | None:
        """The url-encoded fields of `method`, or `None` when it carries files."""
        files: dict[str, InputFile] = {}
        fields = []
        for key, value in method.model_dump(warnings=False).items():
            prepared = self.prepare_value(value, bot=bot, files=files)
            if prepared:
                fields.append((key, prepared))
        if files:
            return None
        return BytesPayload(
            urlencode(fields).encode(), content_type="application/x-www-form-urlencoded"
        )

    async def make_request(
        self,
        bot: Bot,
        method: TelegramMethod[TelegramType],
        timeout: int | None = None,  # noqa: ASYNC109 (aiogram's signature)
    ) -> TelegramType:
        body = self._body(bot, method)
        if body is None:
            return await super().make_request(bot, method, timeout)
        session = await self.create_session()
        url = self.api.api_url(token=bot.token, method=method.__api_method__)
        try:
            total = self.timeout if timeout is None else timeout
            async with session.post(url, data=body, timeout=ClientTimeout(total=total)) as resp:
                raw = await resp.text()
        except TimeoutError as exc:
            raise TelegramNetworkError(method=method, message="Request timeout error") from exc
        except ClientError as exc:
            raise TelegramNetworkError(
                method=method, message=f"{type(exc).__name__}: {exc}"
            ) from exc
        response = self.check_response(bot=bot, method=method, status_code=resp.status, content=raw)
        return cast(TelegramType, response.result)

    async def close(self) -> None:
        if not self._plain_http:
            await super().close()
        elif self._session is not None and not self._session.closed:
            await self._session.close()


TelegramBot = Bot
"""The aiogram `Bot` that `build_bot` makes, as the composition root names it (aiogram itself
stays inside this adapter)."""


def build_bot(token: str, api_base: str) -> Bot:
    """An aiogram Bot talking to `api_base` (`{base}/bot{token}/{method}`), no default markup."""
    return Bot(token, session=_BotSession(api_base), default=DefaultBotProperties())

"""The Messages API provider (Anthropic, and other vendors' Anthropic-format endpoints): the
OpenAI provider's transport and retry policy over `anthropic_wire`."""

from __future__ import annotations

from adapters.llm import anthropic_wire
from adapters.llm.dialects import WireOptions
from adapters.llm.openai_provider import OpenAIProvider, ResponseStream
from bot.ports import LLMRequest


class AnthropicProvider(OpenAIProvider):
    """`LLMProvider` for the native Messages API (Anthropic, and other vendors' Anthropic-format
    endpoints such as DeepSeek's): `POST <base>/v1/messages`, the key in `x-api-key`."""

    _SPLICES_TOOLS = False  # a cache breakpoint may ride on the last tool
    _to_request = staticmethod(anthropic_wire.to_request)
    _from_response = staticmethod(anthropic_wire.from_response)

    def _endpoint(self, base_url: str) -> str:
        if base_url.endswith("/v1"):
            return base_url + "/messages"
        return base_url + "/v1/messages"

    def _default_options(self) -> WireOptions:
        return WireOptions(kind="anthropic", cache="breakpoints")

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json", "anthropic-version": anthropic_wire.API_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        return headers

    def _new_stream(self) -> ResponseStream:
        return anthropic_wire.StreamState()

    def _request_headers(self, request: LLMRequest) -> dict[str, str]:
        return {}


__all__ = ["AnthropicProvider"]

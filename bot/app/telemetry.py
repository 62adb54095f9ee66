"""OpenTelemetry tracing, optional: on when an OTLP endpoint is configured, else never imported.

`start_tracing` reads the standard variables: OTEL_EXPORTER_OTLP_ENDPOINT (or
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) turns tracing on; the SDK itself reads the rest
(OTEL_EXPORTER_OTLP_HEADERS for a backend's credentials, OTEL_SERVICE_NAME, default `tgbot`,
OTEL_RESOURCE_ATTRIBUTES, …). OTEL_CAPTURE_CONTENT=true adds message text to the spans.
Without an endpoint nothing of OpenTelemetry is imported; with one and without the `otel`
extra, start-up stops with one line (`ConfigError`, exit code 2). What the spans hold:
`adapters/otel.py`.

Only the standard library is imported at module level.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from bot.errors import ConfigError

if TYPE_CHECKING:
    from adapters.otel import OtelTracer
    from bot.config import Settings

ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
TRACES_ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
CAPTURE_CONTENT_ENV = "OTEL_CAPTURE_CONTENT"
INSTALL_HINT = "pip install 'tgbot[otel]'"
_PROTOCOLS = ("OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")


def tracing_requested(environ: Mapping[str, str]) -> str | None:
    """The name of the endpoint variable that asks for tracing, or None."""
    for name in (TRACES_ENDPOINT_ENV, ENDPOINT_ENV):
        if environ.get(name, "").strip():
            return name
    return None


def capture_content(environ: Mapping[str, str]) -> bool:
    """OTEL_CAPTURE_CONTENT: `true` or `false` (unset: false); anything else is refused."""
    raw = environ.get(CAPTURE_CONTENT_ENV, "").strip()
    if raw.lower() in ("", "false"):
        return False
    if raw.lower() == "true":
        return True
    raise ConfigError(CAPTURE_CONTENT_ENV, f"expected true or false, got {raw!r}")


def check_tracing(environ: Mapping[str, str]) -> str | None:
    """The endpoint variable in use, after checking the settings tracing needs (None: off)."""
    name = tracing_requested(environ)
    if name is None:
        return None
    capture_content(environ)
    endpoint = environ[name].strip()
    if not endpoint.startswith(("http://", "https://")):
        raise ConfigError(name, f"expected an http:// or https:// URL, got {endpoint!r}")
    for protocol in _PROTOCOLS:
        value = environ.get(protocol, "").strip()
        if value and value != "http/protobuf":
            raise ConfigError(
                protocol, f"only http/protobuf is supported (the `otel` extra), got {value!r}"
            )
    return name


def start_tracing(environ: Mapping[str, str]) -> OtelTracer | None:
    """The tracer `tgbot run` hands to `build_app`, or None when no endpoint is set."""
    name = check_tracing(environ)
    if name is None:
        return None
    try:
        from adapters.otel import OtelTracer
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("opentelemetry"):
            raise
        raise ConfigError(
            name, f"set, but OpenTelemetry is not installed: {INSTALL_HINT}"
        ) from None
    return OtelTracer(capture_content=capture_content(environ))


def route_endpoints(
    settings: Settings, *, offline: bool
) -> dict[str, tuple[str | None, str | None]]:
    """Each route's base URL and wire kind as `bot.app.model_routes.build_routes` wires
    them (a URL of None: the offline scripted model), for naming the provider on model-call
    spans."""
    from adapters.llm.provider_defaults import kind_for

    endpoints: dict[str, tuple[str | None, str | None]] = {
        name: (profile.base_url, kind_for(profile.base_url, profile.kind))
        for name, profile in settings.providers.items()
    }
    default = None if offline else settings.llm_base_url
    kind = kind_for(default, settings.llm_kind) if default else settings.llm_kind
    endpoints.setdefault("default", (default, kind))
    return endpoints

"""Reading the settings' sources and naming a bad one as the operator wrote it.

An environment variable by its name (`HISTORY__GROUP_TOKENS`), a TOML key by its dotted key
and file (`bot.toml: history.group_tokens`); an unknown key at any level is refused with a
"did you mean". `bot.config.load_settings` is the one caller.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from difflib import get_close_matches
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel

from bot.errors import ConfigError


def source_error(message: str) -> ConfigError:
    """pydantic-settings could not decode a value: an `A__B` variable that holds no JSON
    (a list or a mapping must be JSON there), named as the operator wrote it."""
    found = re.search(r'field "(\w+)" from source "EnvSettingsSource"', message)
    if found is not None:
        prefix = found[1].upper()
        names = sorted(n for n in os.environ if n.upper().startswith(prefix))
        return ConfigError(
            names[0] if names else prefix,
            "not valid JSON: lists and tables in a variable are JSON, e.g. "
            "SECURITY__ALLOWED_CHATS='[-1001234, -1005678]'",
        )
    return ConfigError("BOT_CONFIG", message)  # the file was parsed before: not expected


def read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as file:
            return tomllib.load(file)
    except FileNotFoundError:
        raise ConfigError("BOT_CONFIG", f"config file not found: {path}") from None
    except OSError as exc:
        raise ConfigError("BOT_CONFIG", f"cannot read {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("BOT_CONFIG", f"{path}: not valid TOML: {exc}") from None


Hint = Callable[[tuple[str, ...], str], ConfigError]


def refuse_unknown_keys(
    model: type[BaseModel], data: Mapping[str, Any], loc: tuple[str, ...], error: Hint
) -> None:
    """Walk `data` along `model`'s fields; the first key no field has raises `error`."""
    for key, value in data.items():
        field = model.model_fields.get(key)
        keyed_extra = getattr(model, "keyed_extra", None)
        if field is None and keyed_extra is not None and key.lstrip("-").isdigit():
            if isinstance(value, Mapping):  # `[chats."-1001234"]`: an id beside named keys
                refuse_unknown_keys(keyed_extra, value, (*loc, key), error)
            continue
        if field is None:
            raise error((*loc, key), _did_you_mean(key, model.model_fields))
        inner, keyed = section_of(field.annotation)
        if inner is not None and isinstance(value, list):  # `[[mcp.servers]]`: each a section
            for index, item in enumerate(value):
                if isinstance(item, Mapping):
                    refuse_unknown_keys(inner, item, (*loc, key, str(index)), error)
            continue
        if inner is None or not isinstance(value, Mapping):
            continue
        if keyed:  # `[providers.NAME]`: any name, each one a profile
            for name, profile in value.items():
                if isinstance(profile, Mapping):
                    refuse_unknown_keys(inner, profile, (*loc, key, str(name)), error)
        else:
            refuse_unknown_keys(inner, value, (*loc, key), error)


def section_of(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """(the model a field holds, whether it is a mapping of names to that model)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is list and len(args) == 1:
        return section_of(args[0])[0], False
    if origin in (dict, Mapping) and len(args) == 2:
        inner, _ = section_of(args[1])
        return inner, inner is not None
    if origin in (Union, UnionType):
        for arg in args:
            inner, keyed = section_of(arg)
            if inner is not None:
                return inner, keyed
    return None, False


def _did_you_mean(key: str, known: Iterable[str]) -> str:
    close = get_close_matches(key.lower(), list(known), n=1, cutoff=0.6)
    if not close:
        return "unknown key"
    return f"unknown key (did you mean {close[0]}?)"


def toml_error(path: str, loc: tuple[str, ...], message: str) -> ConfigError:
    dotted = ".".join(loc)
    if message.startswith("unknown key (did you mean "):
        parent = ".".join(loc[:-1])
        guess = message.removeprefix("unknown key (did you mean ").removesuffix("?)")
        message = f"unknown key (did you mean {parent + '.' if parent else ''}{guess}?)"
    return ConfigError(dotted, message, source=path)


def refuse_unknown_env(settings: type[BaseModel]) -> None:
    """`SECTION__KEY` variables must name a key of that section (`HISTORY__GROUP_TOKEN` is
    refused with a "did you mean HISTORY__GROUP_TOKENS")."""
    sections = {
        name: field
        for name, field in settings.model_fields.items()
        if section_of(field.annotation)[0] is not None
    }
    for variable in sorted(os.environ):
        head, sep, rest = variable.lower().partition("__")
        if not sep or head not in sections:
            continue
        data: dict[str, Any] = {}
        node = data
        parts = [head, *rest.split("__")]
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = ""

        def env_error(loc: tuple[str, ...], message: str) -> ConfigError:
            guess = message.removeprefix("unknown key (did you mean ").removesuffix("?)")
            if guess != message:
                message = f"unknown setting (did you mean {_env_name((*loc[:-1], guess))}?)"
            else:
                message = "unknown setting"
            return ConfigError(_env_name(loc), message)

        refuse_unknown_keys(settings, data, (), env_error)


def _env_name(loc: Sequence[int | str]) -> str:
    return "__".join(str(p) for p in loc).upper()


def named_error(
    loc: tuple[int | str, ...], message: str, path: str | None, toml: Mapping[str, Any]
) -> ConfigError:
    """Name the setting where its value came from: the environment wins over the file."""
    parts = tuple(str(p) for p in loc)
    env = _env_name(parts)
    if any(name.upper() == env for name in os.environ):
        return ConfigError(env, message)
    if path is not None and (_holds(toml, parts) or (len(parts) > 1 and _holds(toml, parts[:-1]))):
        return ConfigError(".".join(parts), message, source=path)
    return ConfigError(env if len(parts) == 1 else ".".join(parts), message)


def _holds(data: Mapping[str, Any], loc: Sequence[str]) -> bool:
    node: Any = data
    for part in loc:
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True


def clean_message(message: str) -> str:
    return message.removeprefix("Value error, ")

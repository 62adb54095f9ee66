"""What the bot says to people outside model answers: one flat catalogue per locale.

`bot/texts/zh.py` and `bot/texts/en.py` each hold a `TEXTS` dict with the same keys and the
same `{placeholders}` (a test holds them equal). Look a text up with `text(locale, key,
**values)`; an unknown key raises `KeyError`, so a typo fails loudly instead of sending
nothing. Pure data and `str.format`, no I/O: any layer may import it.

Keys by user: commands (`owner_only` … `unknown`), inbound and recovery (`rate_limited`,
`restarted_*`, `internal_error`), a failed turn (`overflow`, `capacity`, `provider`,
`bad_response`, `rejected`, `refusal`, `length`: `TurnFailed.key`), the marker on a reply cut
at the output limit (`cut_marker`), the daily usage summary (`summary_*`).

Not in the catalogues: the media placeholders and notes a model reads (`bot/context`,
service messages in `adapters/telegram`), which are part of the prompt format and sit beside
the code that builds them, both languages side by side through `in_locale`; and the
operator's English CLI output.

Which language the bot speaks to whom is `bot.texts.chat_locales` (`ChatLocales`, exported
here too).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import assert_never

from bot.domain.ids import Locale
from bot.texts import en, zh
from bot.texts.chat_locales import ChatLocales, locale_of_language

CATALOGUES: Mapping[Locale, Mapping[str, str]] = {"zh": zh.TEXTS, "en": en.TEXTS}


def text(locale: Locale, key: str, **values: object) -> str:
    """The text `key` of `locale` with its `{placeholders}` filled from `values`."""
    try:
        template = CATALOGUES[locale][key]
    except KeyError:
        raise KeyError(f"no text {key!r} in the {locale!r} catalogue") from None
    return template.format(**values)


def in_locale(locale: Locale, *, zh: str, en: str) -> str:
    """The one of two texts written side by side that `locale` reads."""
    match locale:
        case "zh":
            return zh
        case "en":
            return en
        case _:
            assert_never(locale)


__all__ = ["CATALOGUES", "ChatLocales", "in_locale", "locale_of_language", "text"]

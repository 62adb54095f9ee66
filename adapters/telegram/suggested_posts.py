"""Suggested posts (a channel's paid post proposals): their price and state, as member-facing
words in either locale."""

from __future__ import annotations

from aiogram.types import Message, SuggestedPostPrice

from adapters.telegram.message_parts import money
from adapters.telegram.text_units import Locale
from bot.domain.facts import Media
from bot.texts import in_locale


def suggested_price(price: SuggestedPostPrice, locale: Locale) -> str:
    """`100 stars` (XTR) or `1.5 TON` (nanotoncoins): a suggested post's price."""
    if price.currency.upper() == "XTR":
        return in_locale(locale, zh=f"{price.amount} 星", en=f"{price.amount} stars")
    if price.currency.upper() == "TON":
        whole, nano = divmod(price.amount, 10**9)
        fraction = f".{nano:09d}".rstrip("0").rstrip(".")
        return f"{whole}{fraction} TON"
    return money(price.amount, price.currency)


_POST_STATES = {
    "pending": ("待审核", "pending"),
    "approved": ("已批准", "approved"),
    "declined": ("已拒绝", "declined"),
}


def suggested_post_fact(msg: Message, locale: Locale) -> tuple[Media, ...]:
    """A suggested post's state and price (`suggested_post_info`) as a placeholder:
    `[suggested post pending, 100 stars]`; () for any other message."""
    info = msg.suggested_post_info
    if info is None:
        return ()
    zh, en = _POST_STATES.get(info.state, (info.state, info.state))
    state = in_locale(locale, zh=zh, en=en)
    cost = suggested_price(info.price, locale) if info.price is not None else ""
    return (Media(kind="suggested_post", detail=", ".join(p for p in (state, cost) if p)),)

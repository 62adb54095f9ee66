"""Fallback chains: which route takes a call when the session's own route is down.

A profile's `fallbacks` (an ordered list of profile names) is its chain. A call whose route
fails in a way a retry of the same route does not fix (`falls_back`: 5xx and 529, a 429
after its retries, a timeout, a refused connection; never a 4xx rejection, an overflow or
a refusal) goes to the next route of the chain, as long as nothing of the reply was shown.
Two memories make the chain cheap to use (docs/architecture.md, Fallback chains):

- The session stays on the route that answered for the primary's
  `fallback_cooldown_seconds`, then tries its own route again (`route_for`: the next turn is
  planned for the fallback from the start: its window, budget and token correction).
- A route that failed `BREAKER_FAILURES` calls in a row is skipped by every chat of the
  process for its own cooldown (a circuit breaker); a success closes it at once. When every
  route of a chain is open the chain is tried in order anyway: skipping all is never better.

Another model's reasoning is never sent (`own_reasoning`): on every route of a chain, a kept
reasoning goes back only to the model it came from, so a DeepSeek-to-Claude switch sends
Claude no DeepSeek thinking, and the rule is the same on every call (the prefix holds).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from bot.agent.routes import ModelRoute
from bot.context.tokens import with_token_estimate
from bot.domain.messages import ChatMessage
from bot.errors import ContextOverflow, ProviderRateLimited, ProviderUnavailable

BREAKER_FAILURES = 2
"""Failed calls in a row (each after the route's own retries) that open a route's breaker."""
MAX_STAYS = 10_000
"""Sessions remembered on a fallback at once; expired stays go first when it is full."""


def falls_back(exc: BaseException) -> bool:
    """Whether a failed call may go to the next route: the route is down or out of
    capacity (5xx, 529, a 429 after its retries, a timeout, a refused connection). A 4xx
    rejection, an overflow (that is recovery's) and a bad body never do."""
    return isinstance(exc, ProviderUnavailable | ProviderRateLimited) and not isinstance(
        exc, ContextOverflow
    )


def own_reasoning(messages: Sequence[ChatMessage], model: str) -> tuple[ChatMessage, ...]:
    """`messages` without the reasoning another model produced (kept reasoning with no model
    recorded goes as before)."""
    if not any(_foreign(m, model) for m in messages):
        return tuple(messages)
    return tuple(
        with_token_estimate(replace(m, reasoning=None)) if _foreign(m, model) else m
        for m in messages
    )


def _foreign(message: ChatMessage, model: str) -> bool:
    kept = message.reasoning
    return kept is not None and kept.model not in ("", model)


@dataclass(slots=True)
class _Stay:
    primary: str
    fallback: str
    until: float


@dataclass(slots=True)
class _Breaker:
    failures: int = 0
    open_until: float = 0.0


class FallbackChains:
    """The chains of the process's profiles, the sessions staying on a fallback, and each
    route's breaker. `resolve` turns a profile name into its route (`RouteTable.resolve`);
    `chains` maps a profile to its fallbacks, `cooldowns` a profile to its
    `fallback_cooldown_seconds`; `now` is a monotonic clock (tests pass their own)."""

    def __init__(
        self,
        *,
        resolve: Callable[[str], ModelRoute],
        chains: Mapping[str, Sequence[str]],
        cooldowns: Mapping[str, float],
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self._resolve = resolve
        self._chains = {name: tuple(chain) for name, chain in chains.items() if chain}
        self._cooldowns = dict(cooldowns)
        self._now = now
        self._members = frozenset(self._chains) | frozenset(
            name for chain in self._chains.values() for name in chain
        )
        self._stays: dict[int, _Stay] = {}
        self._breakers: dict[str, _Breaker] = {}

    @property
    def chains(self) -> Mapping[str, tuple[str, ...]]:
        return self._chains

    def in_chain(self, route: ModelRoute) -> bool:
        """Whether `route`'s profile has fallbacks or is one (its calls follow the rules)."""
        return route.profile in self._members

    def cooldown(self, profile: str) -> float:
        return self._cooldowns.get(profile, 300.0)

    def route_for(self, session_id: int, route: ModelRoute) -> ModelRoute:
        """The route a session's next turn is planned for: its own, or the fallback it
        stays on (its cooldown not over), or the first fallback whose breaker is closed
        while its own route's is open."""
        if route.profile not in self._chains:
            return route
        return self.candidates(session_id, route)[0]

    def candidates(self, session_id: int, route: ModelRoute) -> list[ModelRoute]:
        """The routes a call planned for `route` tries, in order. A fallback carries the
        profile it stands in for as `fallback_from`."""
        primary = route.fallback_from or route.profile
        chain = self._chains.get(primary)
        if chain is None:
            return [route]
        own = route if route.fallback_from is None else self._resolve(primary)
        ordered = [own, *(replace(self._resolve(n), fallback_from=primary) for n in chain)]
        now = self._now()
        stay = self._stays.get(session_id)
        if stay is not None and stay.primary == primary:
            if now >= stay.until:  # the cooldown is over: its own route again
                del self._stays[session_id]
            else:
                # the fallback it stays on, the rest of the chain, its own route last
                first = [r for r in ordered if r.profile == stay.fallback]
                rest = [r for r in ordered[1:] if r.profile != stay.fallback]
                ordered = [*first, *rest, ordered[0]]
        closed = [r for r in ordered if not self._open(r.profile, now)]
        return closed or ordered

    def _open(self, profile: str, now: float) -> bool:
        breaker = self._breakers.get(profile)
        return breaker is not None and breaker.open_until > now

    def failed(self, route: ModelRoute) -> None:
        """A call to `route` failed (`falls_back`): the breaker counts it."""
        breaker = self._breakers.setdefault(route.profile, _Breaker())
        breaker.failures += 1
        if breaker.failures >= BREAKER_FAILURES:
            breaker.open_until = self._now() + self.cooldown(route.profile)

    def answered(self, session_id: int, route: ModelRoute) -> None:
        """`route` answered a call of the session: its breaker closes; a fallback keeps the
        session for its primary's cooldown, its own route ends any stay."""
        self._breakers.pop(route.profile, None)
        primary = route.fallback_from
        if primary is None:
            self._stays.pop(session_id, None)
            return
        stay = self._stays.get(session_id)
        if stay is not None and stay.primary == primary and stay.fallback == route.profile:
            return  # staying already: the cooldown runs from the switch
        if len(self._stays) >= MAX_STAYS:
            self._forget_expired()
        until = self._now() + self.cooldown(primary)
        self._stays[session_id] = _Stay(primary, route.profile, until)

    def _forget_expired(self) -> None:
        now = self._now()
        for session_id in [s for s, stay in self._stays.items() if stay.until <= now]:
            del self._stays[session_id]
        while len(self._stays) >= MAX_STAYS:
            self._stays.pop(next(iter(self._stays)))

    def staying(self) -> dict[int, tuple[str, str]]:
        """The sessions on a fallback now: session id → (own profile, fallback profile)."""
        now = self._now()
        return {s: (st.primary, st.fallback) for s, st in self._stays.items() if st.until > now}

    def open_routes(self) -> tuple[str, ...]:
        """The profiles every chat skips now (their breaker is open)."""
        now = self._now()
        return tuple(sorted(p for p, b in self._breakers.items() if b.open_until > now))

"""`/memory`: members see and delete the facts the bot keeps about them in this chat.

`/memory` lists the asker's facts here, `/memory forget f3` deletes one of them, `/memory
clear` all of them. Only the asker's own facts of this chat are ever named: another member's
fact or another chat's answers as unknown, so the command cannot be used to probe. The listing
is sent as it is but retold (`[Already told the user]`, the next request, its trace) only as
a count, so a fact deleted afterwards leaves no copy in a later request.
"""

from __future__ import annotations

from bot.context.memory_block import MemoryLimits, fact_line, parse_fact_alias
from bot.domain.facts import InboundMessage
from bot.domain.ids import Locale
from bot.services.told_lines import SecretText
from bot.store_ports import MemoryFacts
from bot.texts import text


class MemoryCommand:
    """Answers `/memory [forget fN|clear]` for the member who sent it, in their chat."""

    def __init__(self, facts: MemoryFacts, limits: MemoryLimits) -> None:
        self.facts = facts
        self.limits = limits

    async def answer(self, message: InboundMessage, locale: Locale) -> str:
        words = message.text.split()[1:]
        chat_id, member_id = message.chat_id, message.sender.id
        match words:
            case []:
                return await self.listing(chat_id, member_id, locale)
            case ["clear"]:
                gone = await self.facts.delete_member_facts(chat_id, member_id)
                return text(locale, "memory_cleared", count=gone)
            case ["forget", alias]:
                fact_id = parse_fact_alias(alias)
                fact = None if fact_id is None else await self.facts.find_fact(chat_id, fact_id)
                if fact_id is None or fact is None or fact.member_id != member_id:
                    return text(locale, "memory_unknown", alias=alias[:20])
                await self.facts.delete_facts(chat_id, [fact_id])
                return text(locale, "memory_forgotten", alias=fact.alias)
            case _:
                return text(locale, "memory_usage")

    async def listing(self, chat_id: int, member_id: int, locale: Locale) -> str:
        facts = await self.facts.facts_of(chat_id, member_id, limit=self.limits.per_member)
        mine = [f for f in facts if f.member_id == member_id]
        if not mine:
            return text(locale, "memory_none")
        lines = [text(locale, "memory_listed", count=len(mine)), *map(fact_line, mine)]
        return SecretText("\n".join(lines), told_as=text(locale, "memory_told", count=len(mine)))

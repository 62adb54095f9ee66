"""`InMemoryMemoryFacts`: the memory facts' contract (`bot.store_ports.MemoryFacts`) in a dict.

It passes the same contract test as `storage.memory_facts.SqlMemoryFacts`
(tests/test_storage/test_memory_facts.py).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Literal

from bot.context.memory_block import CHAT_WIDE, MemoryFact


class InMemoryMemoryFacts:
    def __init__(self) -> None:
        self._facts: dict[int, MemoryFact] = {}
        self._next = 1

    async def add_fact(
        self,
        *,
        chat_id: int,
        member_id: int,
        author_id: int,
        text: str,
        created_at: datetime,
        per_member: int,
        per_chat: int,
    ) -> MemoryFact | Literal["per_member", "per_chat"]:
        in_chat = [f for f in self._facts.values() if f.chat_id == chat_id]
        if member_id != CHAT_WIDE and sum(f.member_id == member_id for f in in_chat) >= per_member:
            return "per_member"
        if len(in_chat) >= per_chat:
            return "per_chat"
        fact = MemoryFact(
            id=self._next,
            chat_id=chat_id,
            member_id=member_id,
            author_id=author_id,
            text=text,
            created_at=created_at,
        )
        self._next += 1
        self._facts[fact.id] = fact
        return fact

    async def facts_of(
        self, chat_id: int, member_id: int | None, *, limit: int
    ) -> tuple[MemoryFact, ...]:
        newest = sorted(self._facts.values(), key=lambda f: f.id, reverse=True)
        here = [f for f in newest if f.chat_id == chat_id]
        mine = [f for f in here if member_id is not None and f.member_id == member_id][:limit]
        chats = [f for f in here if f.member_id == CHAT_WIDE][:limit]
        return (*mine, *chats)

    async def find_fact(self, chat_id: int, fact_id: int) -> MemoryFact | None:
        fact = self._facts.get(fact_id)
        return fact if fact is not None and fact.chat_id == chat_id else None

    async def delete_facts(self, chat_id: int, fact_ids: Collection[int]) -> int:
        gone = [i for i in set(fact_ids) if i in self._facts and self._facts[i].chat_id == chat_id]
        for fact_id in gone:
            del self._facts[fact_id]
        return len(gone)

    async def delete_member_facts(self, chat_id: int, member_id: int) -> int:
        ids = [
            f.id for f in self._facts.values() if f.chat_id == chat_id and f.member_id == member_id
        ]
        return await self.delete_facts(chat_id, ids)

    async def list_facts(self, *, chat_id: int | None = None, limit: int) -> tuple[MemoryFact, ...]:
        chosen = [f for f in self._facts.values() if chat_id is None or f.chat_id == chat_id]
        ordered = sorted(chosen, key=lambda f: (f.chat_id, -f.id))
        return tuple(ordered[:limit])

    async def move_chat_facts(self, old_chat_id: int, new_chat_id: int) -> int:
        moved = 0
        for fact_id, fact in list(self._facts.items()):
            if fact.chat_id == old_chat_id:
                self._facts[fact_id] = MemoryFact(
                    id=fact.id,
                    chat_id=new_chat_id,
                    member_id=fact.member_id,
                    author_id=fact.author_id,
                    text=fact.text,
                    created_at=fact.created_at,
                )
                moved += 1
        return moved

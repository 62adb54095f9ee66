"""The sqlmodel tables: sessions, record trees, platform messages and the two claim logs.

Every Telegram id is 64-bit, so every id column is a BigInteger. Integer primary keys use
`BigInteger().with_variant(Integer(), "sqlite")`: SQLite only autoincrements an
`INTEGER PRIMARY KEY` (and its integers are 64-bit anyway).

Two derived columns on `agent_messages` cache message aliases (docs/architecture.md, Aliases), see
`storage.sql`: `alias_seq` (the record's ordinal, `NULL` without a confirmed id) and
`alias_last` (the highest ordinal on the path root → this record; `NULL` = not computed).
They are a pure function of the record's ancestors, never of the active leaf.
These rows never leave `storage/`.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Date,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlmodel import Field, SQLModel

ID_TYPE = BigInteger().with_variant(Integer(), "sqlite")
"""An autoincrementing 64-bit primary key on every backend."""


class ChatSession(SQLModel, table=True):
    __tablename__ = "chat_sessions"
    __table_args__ = (
        UniqueConstraint("platform", "chat_id", "thread_id", name="uq_chat_sessions_key"),
        Index("ix_chat_sessions_chat", "chat_id"),
    )

    id: int | None = Field(default=None, sa_column=Column(ID_TYPE, primary_key=True))
    platform: str = Field(sa_column=Column(String(32), nullable=False))
    chat_id: int = Field(sa_column=Column(BigInteger, nullable=False))
    thread_id: int = Field(default=0, sa_column=Column(BigInteger, nullable=False, default=0))
    scene: str = Field(sa_column=Column(String(16), nullable=False))
    title: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    # No foreign keys on the two pointers below: they would make the two tables refer to
    # each other. The store checks that they name a record of the session.
    active_leaf_id: int | None = Field(default=None, sa_column=Column(BigInteger))
    window_start_id: int | None = Field(default=None, sa_column=Column(BigInteger))
    alias_root_base: int = Field(default=0, sa_column=Column(BigInteger, nullable=False, default=0))
    """Ordinals used by records pruned away before the root, so pruning never renumbers."""
    route: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    created_at: dt.datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
    updated_at: dt.datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
    closed_at: dt.datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True)))
    """When the bot was removed or kicked from the chat (NULL while it is a member)."""


class AgentMessage(SQLModel, table=True):
    __tablename__ = "agent_messages"
    __table_args__ = (
        Index("ix_agent_messages_parent", "parent_id"),
        Index("ix_agent_messages_session_first_id", "session_id", "first_message_id"),
    )

    id: int | None = Field(default=None, sa_column=Column(ID_TYPE, primary_key=True))
    session_id: int = Field(
        sa_column=Column(
            BigInteger, ForeignKey("chat_sessions.id", ondelete="CASCADE"), nullable=False
        )
    )
    parent_id: int | None = Field(
        default=None,
        sa_column=Column(BigInteger, ForeignKey("agent_messages.id"), nullable=True),
    )
    kind: str = Field(sa_column=Column(String(16), nullable=False))
    created_at: dt.datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
    payload: str = Field(sa_column=Column(Text, nullable=False))
    tokens: int = Field(default=0, sa_column=Column(Integer, nullable=False, default=0))
    first_message_id: int | None = Field(default=None, sa_column=Column(BigInteger))
    message_ids: str = Field(default="[]", sa_column=Column(Text, nullable=False, default="[]"))
    alias_seq: int | None = Field(default=None, sa_column=Column(BigInteger))
    alias_last: int | None = Field(default=None, sa_column=Column(BigInteger))


class PlatformMessageRow(SQLModel, table=True):
    __tablename__ = "platform_events"
    __table_args__ = (
        UniqueConstraint("chat_id", "message_id", name="uq_platform_events_message"),
        Index("ix_platform_events_date", "date"),
        Index("ix_platform_events_sender", "sender_id", "chat_id"),
    )

    id: int | None = Field(default=None, sa_column=Column(ID_TYPE, primary_key=True))
    chat_id: int = Field(sa_column=Column(BigInteger, nullable=False))
    message_id: int = Field(sa_column=Column(BigInteger, nullable=False))
    thread_id: int = Field(default=0, sa_column=Column(BigInteger, nullable=False, default=0))
    sender_id: int | None = Field(default=None, sa_column=Column(BigInteger))
    sender_name: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    is_bot: bool = Field(default=False, sa_column=Column(Boolean, nullable=False, default=False))
    date: dt.datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
    text: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    media: str = Field(default="[]", sa_column=Column(Text, nullable=False, default="[]"))
    reply_to_message_id: int | None = Field(default=None, sa_column=Column(BigInteger))
    record_id: int | None = Field(
        default=None,
        sa_column=Column(BigInteger, ForeignKey("agent_messages.id", ondelete="SET NULL")),
    )
    edited_at: dt.datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True)))


class ProcessedUpdate(SQLModel, table=True):
    __tablename__ = "processed_updates"
    __table_args__ = (Index("ix_processed_updates_at", "processed_at"),)

    update_id: int = Field(
        sa_column=Column(BigInteger, primary_key=True, autoincrement=False),
    )
    processed_at: dt.datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))


class DailySummary(SQLModel, table=True):
    __tablename__ = "daily_summaries"

    day: dt.date = Field(sa_column=Column(Date, primary_key=True))
    claimed_at: dt.datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))


class RateLimitBucket(SQLModel, table=True):
    """Messages counted per user or chat (`scope`) and wall-clock minute, shared by the
    workers of one PostgreSQL database (`storage.rate_limits`, migration 0004). Created on
    SQLite too, to keep one schema; a single SQLite worker counts in memory instead."""

    __tablename__ = "rate_limit_buckets"

    scope: str = Field(sa_column=Column(Text, primary_key=True))
    key: int = Field(sa_column=Column(BigInteger, primary_key=True, autoincrement=False))
    minute: int = Field(sa_column=Column(BigInteger, primary_key=True, autoincrement=False))
    count: int = Field(sa_column=Column(Integer, nullable=False))


class ToldUserNote(SQLModel, table=True):
    """An `[Already told the user]` line, shared by the workers of one PostgreSQL database
    (`storage.told_notes`, migration 0005); empty on SQLite, where notes stay in memory."""

    __tablename__ = "told_user_notes"
    __table_args__ = (Index("ix_told_user_notes_chat", "chat_id", "thread_id", "id"),)

    id: int | None = Field(default=None, sa_column=Column(BigInteger, primary_key=True))
    chat_id: int = Field(sa_column=Column(BigInteger, nullable=False))
    thread_id: int = Field(sa_column=Column(BigInteger, nullable=False))
    line: str = Field(sa_column=Column(Text, nullable=False))


class TokenCorrectionRow(SQLModel, table=True):
    """One route's learned token correction, shared by the workers of one PostgreSQL
    database (`storage.token_corrections`, migration 0006); empty on SQLite."""

    __tablename__ = "token_corrections"

    route: str = Field(sa_column=Column(Text, primary_key=True))
    ratio: float = Field(sa_column=Column(Float, nullable=False))
    samples: int = Field(sa_column=Column(Integer, nullable=False))


class TokenCorrectionWorkerRow(SQLModel, table=True):
    """One worker's state of one route's token correction: its ratio and how many calls it
    learned from itself (`storage.token_corrections`, migration 0009); empty on SQLite."""

    __tablename__ = "token_correction_workers"

    route: str = Field(sa_column=Column(Text, primary_key=True))
    worker: str = Field(sa_column=Column(Text, primary_key=True))
    ratio: float = Field(sa_column=Column(Float, nullable=False))
    samples: int = Field(sa_column=Column(Integer, nullable=False))
    updated_at: dt.datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))


class SendPacingRow(SQLModel, table=True):
    """One chat's outbound pacing books (row 0: the bot-wide budget), shared by the workers
    of one PostgreSQL database (`storage.send_pacing`, migration 0007); empty on SQLite."""

    __tablename__ = "send_pacing"

    chat_id: int = Field(sa_column=Column(BigInteger, primary_key=True, autoincrement=False))
    last_at: float = Field(sa_column=Column(Float, nullable=False))
    recent: str = Field(sa_column=Column(Text, nullable=False))
    paused_until: float = Field(sa_column=Column(Float, nullable=False))


class ReactionRow(SQLModel, table=True):
    """A reaction a member put on one of the bot's messages (migration 0002)."""

    __tablename__ = "reactions"
    __table_args__ = (
        Index("ix_reactions_chat_at", "chat_id", "thread_id", "created_at"),
        Index("ix_reactions_at", "created_at"),
    )

    id: int | None = Field(default=None, sa_column=Column(ID_TYPE, primary_key=True))
    chat_id: int = Field(sa_column=Column(BigInteger, nullable=False))
    thread_id: int = Field(default=0, sa_column=Column(BigInteger, nullable=False, default=0))
    message_id: int = Field(sa_column=Column(BigInteger, nullable=False))
    user_id: int = Field(sa_column=Column(BigInteger, nullable=False))
    user_name: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    emoji: str = Field(sa_column=Column(Text, nullable=False))
    created_at: dt.datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))


def _table(name: str) -> Table:
    return SQLModel.metadata.tables[name]


SESSIONS = _table("chat_sessions")
MESSAGES = _table("agent_messages")
PLATFORM_MESSAGES = _table("platform_events")
UPDATES = _table("processed_updates")
SUMMARIES = _table("daily_summaries")
REACTIONS = _table("reactions")


class SpendCounterRow(SQLModel, table=True):
    """What one budget (`scope`: member, chat, day, month) spent in one period, and what
    calls in flight hold on it (`storage.spend`, migration 0007). Money in billionths."""

    __tablename__ = "spend_counters"

    scope: str = Field(sa_column=Column(Text, primary_key=True))
    period: str = Field(sa_column=Column(Text, primary_key=True))
    chat_id: int = Field(sa_column=Column(BigInteger, primary_key=True, autoincrement=False))
    user_id: int = Field(sa_column=Column(BigInteger, primary_key=True, autoincrement=False))
    cost: int = Field(sa_column=Column(BigInteger, nullable=False))
    tokens: int = Field(sa_column=Column(BigInteger, nullable=False))
    held_cost: int = Field(sa_column=Column(BigInteger, nullable=False))
    held_tokens: int = Field(sa_column=Column(BigInteger, nullable=False))


class SpendNoticeRow(SQLModel, table=True):
    """A notice given once per budget and period (`storage.spend`, migration 0007)."""

    __tablename__ = "spend_notices"

    kind: str = Field(sa_column=Column(Text, primary_key=True))
    scope: str = Field(sa_column=Column(Text, primary_key=True))
    period: str = Field(sa_column=Column(Text, primary_key=True))
    chat_id: int = Field(sa_column=Column(BigInteger, primary_key=True, autoincrement=False))
    user_id: int = Field(sa_column=Column(BigInteger, primary_key=True, autoincrement=False))


class ChatSettingRow(SQLModel, table=True):
    """One setting of one chat changed with `/settings`, as JSON, over the TOML file's
    (`storage.chat_settings`, migration 0013)."""

    __tablename__ = "chat_settings"

    chat_id: int = Field(sa_column=Column(BigInteger, primary_key=True, autoincrement=False))
    name: str = Field(sa_column=Column(String(64), primary_key=True))
    value: str = Field(sa_column=Column(Text, nullable=False))
    changed_by: int = Field(sa_column=Column(BigInteger, nullable=False))
    changed_at: dt.datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))


class MemoryFactRow(SQLModel, table=True):
    """A fact the model kept on purpose, about one member of one chat (`member_id`) or about
    the chat (`member_id` 0): `storage.memory_facts`, migration 0012."""

    __tablename__ = "memory_facts"
    __table_args__ = (Index("ix_memory_facts_chat_member", "chat_id", "member_id", "id"),)

    id: int | None = Field(default=None, sa_column=Column(ID_TYPE, primary_key=True))
    chat_id: int = Field(sa_column=Column(BigInteger, nullable=False))
    member_id: int = Field(sa_column=Column(BigInteger, nullable=False))
    author_id: int = Field(sa_column=Column(BigInteger, nullable=False))
    text: str = Field(sa_column=Column(Text, nullable=False))
    created_at: dt.datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))

"""The first schema: sessions, record trees, platform messages, update and summary claims.

Revision ID: 0001
Revises:
Create Date: 2026-01-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from storage.tables import ID_TYPE

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _id() -> sa.Column[int]:
    """An autoincrementing 64-bit primary key (SQLite autoincrements only INTEGER)."""
    return sa.Column("id", ID_TYPE, primary_key=True)


def _at(name: str, *, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "chat_sessions",
        _id(),
        sa.Column("platform", sa.String(32), nullable=False),
        sa.Column("chat_id", sa.BigInteger(), nullable=False),
        sa.Column("thread_id", sa.BigInteger(), nullable=False),
        sa.Column("scene", sa.String(16), nullable=False),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("active_leaf_id", sa.BigInteger(), nullable=True),
        sa.Column("window_start_id", sa.BigInteger(), nullable=True),
        sa.Column("alias_root_base", sa.BigInteger(), nullable=False),
        sa.Column("route", sa.Text(), nullable=True),
        _at("created_at"),
        _at("updated_at"),
        sa.UniqueConstraint("platform", "chat_id", "thread_id", name="uq_chat_sessions_key"),
    )
    op.create_table(
        "agent_messages",
        _id(),
        sa.Column(
            "session_id",
            sa.BigInteger(),
            sa.ForeignKey("chat_sessions.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("parent_id", sa.BigInteger(), sa.ForeignKey("agent_messages.id"), nullable=True),
        sa.Column("kind", sa.String(16), nullable=False),
        _at("created_at"),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column("first_message_id", sa.BigInteger(), nullable=True),
        sa.Column("message_ids", sa.Text(), nullable=False),
        sa.Column("alias_seq", sa.BigInteger(), nullable=True),
        sa.Column("alias_last", sa.BigInteger(), nullable=True),
    )
    op.create_index("ix_agent_messages_parent", "agent_messages", ["parent_id"])
    op.create_index(
        "ix_agent_messages_session_first_id", "agent_messages", ["session_id", "first_message_id"]
    )
    op.create_table(
        "platform_events",
        _id(),
        sa.Column("chat_id", sa.BigInteger(), nullable=False),
        sa.Column("message_id", sa.BigInteger(), nullable=False),
        sa.Column("thread_id", sa.BigInteger(), nullable=False),
        sa.Column("sender_id", sa.BigInteger(), nullable=True),
        sa.Column("sender_name", sa.Text(), nullable=False),
        sa.Column("is_bot", sa.Boolean(), nullable=False),
        _at("date"),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("media", sa.Text(), nullable=False),
        sa.Column("reply_to_message_id", sa.BigInteger(), nullable=True),
        sa.Column(
            "record_id",
            sa.BigInteger(),
            sa.ForeignKey("agent_messages.id", ondelete="SET NULL"),
            nullable=True,
        ),
        _at("edited_at", nullable=True),
        sa.UniqueConstraint("chat_id", "message_id", name="uq_platform_events_message"),
    )
    op.create_index("ix_platform_events_date", "platform_events", ["date"])
    op.create_table(
        "processed_updates",
        sa.Column("update_id", sa.BigInteger(), primary_key=True, autoincrement=False),
        _at("processed_at"),
    )
    op.create_index("ix_processed_updates_at", "processed_updates", ["processed_at"])
    op.create_table(
        "daily_summaries",
        sa.Column("day", sa.Date(), primary_key=True),
        _at("claimed_at"),
    )


def downgrade() -> None:
    op.drop_table("daily_summaries")
    op.drop_index("ix_processed_updates_at", table_name="processed_updates")
    op.drop_table("processed_updates")
    op.drop_index("ix_platform_events_date", table_name="platform_events")
    op.drop_table("platform_events")
    op.drop_index("ix_agent_messages_session_first_id", table_name="agent_messages")
    op.drop_index("ix_agent_messages_parent", table_name="agent_messages")
    op.drop_table("agent_messages")
    op.drop_table("chat_sessions")

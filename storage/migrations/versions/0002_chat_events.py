"""Chat events: a session's `closed_at` (the bot was removed or kicked) and the reactions
members put on the bot's messages.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from storage.tables import ID_TYPE

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("chat_sessions") as batch:
        batch.add_column(sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        "reactions",
        sa.Column("id", ID_TYPE, primary_key=True),
        sa.Column("chat_id", sa.BigInteger(), nullable=False),
        sa.Column("thread_id", sa.BigInteger(), nullable=False),
        sa.Column("message_id", sa.BigInteger(), nullable=False),
        sa.Column("user_id", sa.BigInteger(), nullable=False),
        sa.Column("user_name", sa.Text(), nullable=False),
        sa.Column("emoji", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_reactions_chat_at", "reactions", ["chat_id", "thread_id", "created_at"])
    op.create_index("ix_reactions_at", "reactions", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_reactions_at", table_name="reactions")
    op.drop_index("ix_reactions_chat_at", table_name="reactions")
    op.drop_table("reactions")
    with op.batch_alter_table("chat_sessions") as batch:
        batch.drop_column("closed_at")

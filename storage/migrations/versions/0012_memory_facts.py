"""Memory facts (`storage.memory_facts`): what the model kept on purpose with `remember`, one
row per fact, keyed by (chat, member); `member_id` 0 is a fact about the chat.

Revision ID: 0012
Revises: 0010
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from storage.tables import ID_TYPE

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "memory_facts",
        sa.Column("id", ID_TYPE, primary_key=True),
        sa.Column("chat_id", sa.BigInteger(), nullable=False),
        sa.Column("member_id", sa.BigInteger(), nullable=False),
        sa.Column("author_id", sa.BigInteger(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_memory_facts_chat_member", "memory_facts", ["chat_id", "member_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_memory_facts_chat_member", table_name="memory_facts")
    op.drop_table("memory_facts")

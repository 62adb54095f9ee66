"""`[Already told the user]` notes shared by the workers of one PostgreSQL database
(`storage.told_notes`). Created on SQLite too (one schema), where it stays empty.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "told_user_notes",
        sa.Column("id", sa.BigInteger(), primary_key=True),
        sa.Column("chat_id", sa.BigInteger(), nullable=False),
        sa.Column("thread_id", sa.BigInteger(), nullable=False),
        sa.Column("line", sa.Text(), nullable=False),
    )
    op.create_index("ix_told_user_notes_chat", "told_user_notes", ["chat_id", "thread_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_told_user_notes_chat", table_name="told_user_notes")
    op.drop_table("told_user_notes")

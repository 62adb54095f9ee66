"""Outbound pacing books shared by the workers of one PostgreSQL database
(`storage.send_pacing`). Created on SQLite too (one schema), where it stays empty: a single
worker keeps its books in memory.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "send_pacing",
        sa.Column("chat_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("last_at", sa.Float(), nullable=False),
        sa.Column("recent", sa.Text(), nullable=False),
        sa.Column("paused_until", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("chat_id"),
    )


def downgrade() -> None:
    op.drop_table("send_pacing")

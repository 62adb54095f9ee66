"""Spend counters and the notices they gave (`storage.spend`): what each budget spent and
what calls in flight hold, per period, on SQLite (one worker; a restart keeps the spend) and
PostgreSQL (shared by the workers).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "spend_counters",
        sa.Column("scope", sa.Text(), nullable=False),
        sa.Column("period", sa.Text(), nullable=False),
        sa.Column("chat_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("user_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("cost", sa.BigInteger(), nullable=False),
        sa.Column("tokens", sa.BigInteger(), nullable=False),
        sa.Column("held_cost", sa.BigInteger(), nullable=False),
        sa.Column("held_tokens", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("scope", "period", "chat_id", "user_id"),
    )
    op.create_table(
        "spend_notices",
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("scope", sa.Text(), nullable=False),
        sa.Column("period", sa.Text(), nullable=False),
        sa.Column("chat_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("user_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.PrimaryKeyConstraint("kind", "scope", "period", "chat_id", "user_id"),
    )


def downgrade() -> None:
    op.drop_table("spend_notices")
    op.drop_table("spend_counters")

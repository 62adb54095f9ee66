"""Rate-limit buckets shared by the workers of one PostgreSQL database (`storage.rate_limits`).

Created on SQLite too (one schema for both), where it stays empty: a single worker counts in
its own sliding windows.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "rate_limit_buckets",
        sa.Column("scope", sa.Text(), nullable=False),
        sa.Column("key", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("minute", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("scope", "key", "minute"),
    )


def downgrade() -> None:
    op.drop_table("rate_limit_buckets")

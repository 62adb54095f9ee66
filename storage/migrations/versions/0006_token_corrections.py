"""Per-route token corrections shared by the workers of one PostgreSQL database
(`storage.token_corrections`). Created on SQLite too (one schema), where it stays empty: a
single worker keeps `DATA_DIR/token-corrections.json`.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "token_corrections",
        sa.Column("route", sa.Text(), primary_key=True),
        sa.Column("ratio", sa.Float(), nullable=False),
        sa.Column("samples", sa.Integer(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("token_corrections")

"""Token corrections shared by the workers without a row lock per call
(`storage.token_corrections`): each worker upserts its own row per route every few seconds,
and every worker adopts the samples-weighted mean of the route's recent rows. The rows of
`token_corrections` (one per route, locked by every call until now) are carried over as one
worker's rows. Created on SQLite too (one schema), where it stays empty.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from storage.engine import backend_for

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "token_correction_workers",
        sa.Column("route", sa.Text(), nullable=False),
        sa.Column("worker", sa.Text(), nullable=False),
        sa.Column("ratio", sa.Float(), nullable=False),
        sa.Column("samples", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("route", "worker"),
    )
    backend_for(op.get_bind()).migrations.carry_token_corrections(op)


def downgrade() -> None:
    op.drop_table("token_correction_workers")

"""Scheduled jobs and their runs (`storage.jobs`): what members asked the bot to post or do
at a time, and each run's outcome (Telegram's message id, or its words when it refused).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from storage.tables import ID_TYPE

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", ID_TYPE, primary_key=True),
        sa.Column("chat_id", sa.BigInteger(), nullable=False),
        sa.Column("thread_id", sa.BigInteger(), nullable=False),
        sa.Column("creator_id", sa.BigInteger(), nullable=False),
        sa.Column("creator_name", sa.Text(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("mode", sa.String(8), nullable=False),
        sa.Column("repeat", sa.Text(), nullable=True),
        sa.Column("zone", sa.Text(), nullable=False),
        sa.Column("reply_to", sa.BigInteger(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("next_at", sa.Float(), nullable=True),
        sa.Column("first_at", sa.Float(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
    )
    op.create_index("ix_jobs_chat", "jobs", ["chat_id", "status"])
    op.create_index("ix_jobs_creator", "jobs", ["creator_id", "status"])
    op.create_table(
        "job_runs",
        sa.Column("id", ID_TYPE, primary_key=True),
        sa.Column("job_id", sa.BigInteger(), sa.ForeignKey("jobs.id"), nullable=False),
        sa.Column("due_at", sa.Float(), nullable=False),
        sa.Column("try_at", sa.Float(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("worker", sa.Text(), nullable=True),
        sa.Column("claimed_at", sa.Float(), nullable=True),
        sa.Column("message_id", sa.BigInteger(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("late", sa.Boolean(), nullable=False),
        sa.Column("finished_at", sa.Float(), nullable=True),
        sa.UniqueConstraint("job_id", "due_at", name="uq_job_runs_due"),
    )
    op.create_index("ix_job_runs_due", "job_runs", ["status", "try_at"])


def downgrade() -> None:
    op.drop_index("ix_job_runs_due", table_name="job_runs")
    op.drop_table("job_runs")
    op.drop_index("ix_jobs_creator", table_name="jobs")
    op.drop_index("ix_jobs_chat", table_name="jobs")
    op.drop_table("jobs")

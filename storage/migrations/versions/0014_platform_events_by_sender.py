"""An index on `platform_events (sender_id, chat_id)`: `private_chats = "members"` asks, for
a stranger's private chat, whether that user wrote in an allowed group
(`storage.group_members.SEEN_IN_GROUPS`); without it the question scans every stored
message. EXPLAIN QUERY PLAN after: `SEARCH platform_events USING COVERING INDEX
ix_platform_events_sender (sender_id=? AND chat_id=?)`.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_platform_events_sender", "platform_events", ["sender_id", "chat_id"])


def downgrade() -> None:
    op.drop_index("ix_platform_events_sender", table_name="platform_events")

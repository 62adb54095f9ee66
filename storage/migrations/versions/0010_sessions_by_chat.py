"""An index on `chat_sessions.chat_id`: the queries that find a chat's sessions by chat id
alone (every inbound batch opens its chats' sessions, `SESSIONS_OF_CHATS`; every send asks
whether the chat was closed, `CLOSED_SESSION_OF_CHAT`; `set_chat_closed`) scanned the whole
table, since the unique key starts with `platform`. EXPLAIN QUERY PLAN before: `SCAN
chat_sessions`; after: `SEARCH chat_sessions USING INDEX ix_chat_sessions_chat (chat_id=?)`.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_chat_sessions_chat", "chat_sessions", ["chat_id"])


def downgrade() -> None:
    op.drop_index("ix_chat_sessions_chat", table_name="chat_sessions")

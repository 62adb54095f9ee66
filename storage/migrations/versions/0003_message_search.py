"""Full-text search over platform messages (`storage.search`), built for what is stored.

SQLite: an FTS5 table `message_search(scope, body)` keyed by the event's rowid, and a trigger
that drops an entry with its event. PostgreSQL: a `message_search` table with a tsvector per
event (GIN index), deleted with its event by the foreign key. Existing events are indexed
here, in chunks.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from storage.search import index_tokens, scope_token

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_CHUNK = 2_000


def upgrade() -> None:
    bind = op.get_bind()
    postgres = bind.dialect.name == "postgresql"
    if postgres:
        op.create_table(
            "message_search",
            sa.Column(
                "event_id",
                sa.BigInteger(),
                sa.ForeignKey("platform_events.id", ondelete="CASCADE"),
                primary_key=True,
            ),
            sa.Column("chat_id", sa.BigInteger(), nullable=False),
            sa.Column("thread_id", sa.BigInteger(), nullable=False),
            sa.Column("terms", postgresql.TSVECTOR(), nullable=False),
        )
        op.create_index("ix_message_search_chat", "message_search", ["chat_id", "thread_id"])
        op.create_index(
            "ix_message_search_terms", "message_search", ["terms"], postgresql_using="gin"
        )
        add = sa.text(
            "INSERT INTO message_search (event_id, chat_id, thread_id, terms) "
            "VALUES (:id, :chat, :thread, array_to_tsvector(CAST(:tokens AS text[])))"
        )
    else:
        op.execute("CREATE VIRTUAL TABLE message_search USING fts5(scope, body, tokenize='ascii')")
        op.execute(
            "CREATE TRIGGER platform_events_unindex AFTER DELETE ON platform_events "
            "BEGIN DELETE FROM message_search WHERE rowid = old.id; END"
        )
        add = sa.text("INSERT INTO message_search(rowid, scope, body) VALUES (:id, :scope, :body)")
    last = 0
    while True:
        rows = bind.execute(
            sa.text(
                "SELECT id, chat_id, thread_id, text FROM platform_events "
                "WHERE id > :last ORDER BY id LIMIT :n"
            ),
            {"last": last, "n": _CHUNK},
        ).all()
        if not rows:
            break
        last = rows[-1].id
        params = []
        for row in rows:
            tokens = index_tokens(row.text)
            if not tokens:
                continue
            if postgres:
                params.append(
                    {
                        "id": row.id,
                        "chat": row.chat_id,
                        "thread": row.thread_id,
                        "tokens": sorted(set(tokens)),
                    }
                )
            else:
                params.append(
                    {
                        "id": row.id,
                        "scope": scope_token(row.chat_id, row.thread_id),
                        "body": " ".join(tokens),
                    }
                )
        if params:
            bind.execute(add, params)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.drop_table("message_search")
    else:
        op.execute("DROP TRIGGER IF EXISTS platform_events_unindex")
        op.execute("DROP TABLE IF EXISTS message_search")

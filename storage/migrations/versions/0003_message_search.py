"""Full-text search over platform messages (`storage.search`), built for what is stored.

SQLite: an FTS5 table `message_search(scope, body)` keyed by the event's rowid, and a trigger
that drops an entry with its event. PostgreSQL: a `message_search` table with a tsvector per
event (GIN index), deleted with its event by the foreign key (each built by its backend's
`Migrations`). Existing events are indexed here, in chunks.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from storage.engine import backend_for
from storage.search import index_tokens

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_CHUNK = 2_000


def upgrade() -> None:
    bind = op.get_bind()
    migrations = backend_for(bind).migrations
    migrations.create_message_search(op)
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
        params = [
            migrations.index_message(row, tokens)
            for row in rows
            if (tokens := index_tokens(row.text))
        ]
        if params:
            bind.execute(migrations.index_statement, params)


def downgrade() -> None:
    backend_for(op.get_bind()).migrations.drop_message_search(op)

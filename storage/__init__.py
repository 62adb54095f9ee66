"""Persistence: sqlmodel tables, mappers and the SQL store (SQLite and PostgreSQL).

- `storage.engine.create_engine_for(url)`: the async engine (SQLite tuned, or asyncpg);
- `storage.migrate.upgrade_database(url)`: Alembic upgrade to head (packaged scripts);
- `storage.schema.schema_at_head(url)`: the start-up check that skips Alembic when current;
- `storage.sql.SqlStore(engine)`: `bot.store_ports.ConversationStore`, composed of one class
  per store role (`storage.sessions`, `storage.history`, `storage.platform_messages`,
  `storage.history_search`, `storage.chat_events`, `storage.claims`) on one
  `storage.executor.Database`;
- `testkit.memory_store.InMemoryStore()` (not shipped): the same contract in memory, for tests;
- `storage.record_write`: the record write as one plan (`storage.plan`), run by
  `storage.plan_run.run_plan` or as one `sqlite3` job; `storage.sqlite` and
  `storage.postgres`: what differs between the two databases;
- `storage.inbound_batch`: group commit of a `getUpdates` batch (`append_inbound`), retried;
- `storage.alias_cache`: the per-record alias ordinals and their pure derivation
  (`storage.alias_repair`: their repairs);
- `storage.queries`: prebuilt SQL; `storage.codec`: table rows to domain values and back
  (payload JSON included);
- `storage.sqlite.driver`: SQLite's connections (`storage.sqlite.worker`: their thread);
  `storage.sqlite.jobs`: their `BEGIN`, the writer queue and whole jobs;
- `storage.retention`: the prune policy and `PruneResult`; `storage.sql_prune`: the prune
  on SQL.
"""

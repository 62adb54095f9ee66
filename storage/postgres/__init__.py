"""What only PostgreSQL needs: its backend (`storage.postgres.backend`: engine, migration
parts), its whole jobs (`storage.postgres.jobs`), its sub-plans of the record write
(`storage.postgres.parts`), its locks and live channel."""

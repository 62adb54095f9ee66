"""What only PostgreSQL needs: its sub-plans of the record write (`storage.postgres.parts`)."""

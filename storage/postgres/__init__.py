"""What only PostgreSQL needs: its whole jobs (`storage.postgres.jobs`) and its sub-plans of the
record write (`storage.postgres.parts`)."""

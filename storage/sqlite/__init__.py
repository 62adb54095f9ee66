"""What only SQLite needs: its sub-plans of the record write (`storage.sqlite.parts`)."""

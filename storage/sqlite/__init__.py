"""What only SQLite needs: its backend (`storage.sqlite.backend`: engine, migration parts),
its connections (`storage.sqlite.driver`), whole jobs (`storage.sqlite.jobs`) and sub-plans
of the record write (`storage.sqlite.parts`)."""

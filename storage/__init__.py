"""Persistence: sqlmodel tables, mappers and the SQL store (SQLite and PostgreSQL)."""

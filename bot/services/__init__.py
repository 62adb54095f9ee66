"""Use cases: inbound messages, edits, the daily summary, the usage report."""

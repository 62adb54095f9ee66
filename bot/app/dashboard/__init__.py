"""The operator dashboard: read-only pages over the store and the ledger.

See docs/architecture.md, Dashboard.
"""

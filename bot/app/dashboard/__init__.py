"""The operator dashboard (DESIGN.md §9): read-only pages over the store and the ledger."""

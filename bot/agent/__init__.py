"""The turn runtime: tool loop, alias rewriting, recovery, events and the ledger writer."""

"""Frozen value objects shared by every layer: ids, inbound facts and conversation records."""

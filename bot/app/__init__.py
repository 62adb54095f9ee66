"""The composition root and entry points: wiring, CLI command bodies, serving, demo, dashboard."""

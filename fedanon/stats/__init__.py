"""stats: see docs/design.md."""

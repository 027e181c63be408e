"""privacy: see docs/design.md."""

"""search: see docs/design.md."""

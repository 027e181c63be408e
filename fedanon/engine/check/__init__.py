"""check: see docs/design.md."""

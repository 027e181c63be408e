"""oracle: see docs/design.md."""

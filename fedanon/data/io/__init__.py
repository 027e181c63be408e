"""io: see docs/design.md."""

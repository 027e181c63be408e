"""model: see docs/design.md."""

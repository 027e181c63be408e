"""data: see docs/design.md."""

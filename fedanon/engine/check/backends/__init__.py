"""backends: see docs/design.md."""

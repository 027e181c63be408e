"""metrics: see docs/design.md."""

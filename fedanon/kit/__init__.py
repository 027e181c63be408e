"""kit: see docs/design.md."""

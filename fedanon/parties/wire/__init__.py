"""What travels between daemons: the gRPC transport, per-run inboxes, admission limits, health, the result."""

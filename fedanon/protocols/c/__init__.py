"""Protocol C: Protocol B's star plus pseudotuples and encrypted row counters (no party learns a class size)."""

"""Hybrid distributions: column groups joined on encrypted person identifiers (see `join`)."""

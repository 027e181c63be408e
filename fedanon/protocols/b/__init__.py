"""Protocol B: shared deterministic AES keys, a star around a helper."""

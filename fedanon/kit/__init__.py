"""Small shared utilities with no fedanon dependency: atomic files, cores, shared memory, TOML, BLAS threads."""

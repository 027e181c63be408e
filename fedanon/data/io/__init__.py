"""Reading and writing tables: one module per file format."""

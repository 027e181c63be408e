"""Answering the search's question about one node: the checker seam, the grouper, and row-partition backends."""

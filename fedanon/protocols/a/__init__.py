"""Protocol A: commutative encryption around a ring of the data holders, no helper."""

"""Searching the generalization lattice: the lattice, Flash, and the bounded heuristic."""

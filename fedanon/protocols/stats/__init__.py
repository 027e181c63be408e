"""Differentially private statistics of the integrated table in Protocols B and C (see roles.py)."""

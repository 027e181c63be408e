"""Differential privacy: exact noise and sampling, SafePub's parameters, budget accounting.

Below the model layer on purpose: the privacy model needs the derived k to describe and
validate itself, the engine needs the samplers to draw, and `fedanon stats` needs the
noise -- none of these pieces knows about tables, lattices or parties.
"""

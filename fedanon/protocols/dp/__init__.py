"""The (ε, δ)-DP microdata release (SafePub) in the protocols: sampling at the primaries, the search at one party."""

"""Running protocols without daemons: in-process runs, dealing a pooled table, equivalence and baselines."""

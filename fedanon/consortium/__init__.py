"""What several commands and the benchmarks run: simulated consortia and their summaries."""

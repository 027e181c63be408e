"""Independent checks of the engine: the verifier, the exhaustive optimum, and the anonymize-then-integrate baselines."""

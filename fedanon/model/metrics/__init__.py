"""Information-loss metrics: the base class, the registry and one module per family of metrics."""

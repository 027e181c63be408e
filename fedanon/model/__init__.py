"""What to anonymize for: the config, the registries of privacy models and metrics, and the models themselves."""

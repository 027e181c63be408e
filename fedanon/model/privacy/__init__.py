"""Privacy models beyond k-anonymity: one module each, registered with fedanon.model.registry."""

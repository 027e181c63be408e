"""fedanon: secure distributed anonymization with a Flash engine that runs on ciphertext."""

__version__ = "0.1.0"

"""fedanon: secure distributed anonymization with a Flash engine that runs on ciphertext."""

from typing import Any

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """`fedanon.anonymize_frame` without importing pandas for every `import fedanon`."""
    if name == "anonymize_frame":
        from fedanon.frame import anonymize_frame

        return anonymize_frame
    raise AttributeError(f"module 'fedanon' has no attribute {name!r}")

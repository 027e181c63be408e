"""fedanon: secure distributed anonymization with a Flash engine that runs on ciphertext."""

from typing import Any

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """`fedanon.anonymize_frame` and `fedanon.Report` without importing pandas for every `import fedanon`."""
    if name in ("anonymize_frame", "Report", "FrameReport"):
        from fedanon import frame

        return getattr(frame, name)
    if name == "microaggregate":
        from fedanon.microagg import microaggregate

        return microaggregate
    raise AttributeError(f"module 'fedanon' has no attribute {name!r}")

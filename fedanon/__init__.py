"""fedanon: secure distributed anonymization with a Flash engine that runs on ciphertext."""

from typing import Any

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """`fedanon.anonymize`, `fedanon.anonymize_frame` and `fedanon.Report`, imported on first use so that
    `import fedanon` (every command's first step) loads neither the engine nor pandas."""
    if name in ("anonymize_frame", "Report", "FrameReport"):
        from fedanon import frame

        return getattr(frame, name)
    if name in ("anonymize", "AnonymizationConfig"):
        from fedanon import engine

        return getattr(engine, name)
    if name == "microaggregate":
        from fedanon.microagg import microaggregate

        return microaggregate
    raise AttributeError(f"module 'fedanon' has no attribute {name!r}")

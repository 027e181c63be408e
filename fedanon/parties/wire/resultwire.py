"""The anonymized result on its way from the result recipient to the coordinator.

Snappy-compressed JSON: small enough for ADULT-sized outputs, trivially
streamable in chunks, and independent of the engine's table classes.
"""

from __future__ import annotations

import json

import snappy

from fedanon.errors import ProtocolError


def _text(value: object) -> str:
    return value.decode("utf-8") if isinstance(value, (bytes, bytearray)) else str(value)


def encode_result(columns: list[str], rows: list[list[str]]) -> bytes:
    doc = {"columns": [_text(c) for c in columns], "rows": [[_text(v) for v in row] for row in rows]}
    return snappy.compress(json.dumps(doc, separators=(",", ":")).encode())


def decode_result(blob: bytes) -> tuple[list[str], list[list[str]]]:
    from fedanon.protocols.kit.codec import checked_uncompress

    try:
        body = checked_uncompress(blob, "result")  # refuses a block declaring more than the limit
    except ProtocolError as exc:
        raise ProtocolError(f"the result sent by the recipient is malformed ({exc})") from None
    try:
        doc = json.loads(body)
        return [str(c) for c in doc["columns"]], [[str(v) for v in row] for row in doc["rows"]]
    except Exception as exc:  # corrupted stream: name it, never dump content
        raise ProtocolError(f"the result sent by the recipient is malformed ({type(exc).__name__})") from None

"""The local anonymization engine: encoded tables, hierarchies, Flash, models, metrics.

Everything here works on opaque byte values, so the same code anonymizes plaintext
and the encrypted tables the protocols integrate.
"""

from fedanon.engine.anonymizer import anonymize
from fedanon.model.config import AnonymizationConfig
from fedanon.model.privacy.presence import DeltaPresence
from fedanon.model.privacy.ldiversity import LDiversity
from fedanon.model.privacy.tcloseness import TCloseness
from fedanon.model.metrics.registry import METRICS
from fedanon.data.io.delimited import read_table_csv, write_table_csv
from fedanon.data.hierarchy import Hierarchy
from fedanon.engine.result import AnonymizationResult, NoSolutionError
from fedanon.data.table import EncodedTable

__all__ = [
    "AnonymizationConfig",
    "AnonymizationResult",
    "DeltaPresence",
    "EncodedTable",
    "Hierarchy",
    "LDiversity",
    "METRICS",
    "NoSolutionError",
    "TCloseness",
    "anonymize",
    "read_table_csv",
    "write_table_csv",
]

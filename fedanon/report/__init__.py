"""What a data steward looks at around the optimum: risk, utility and an HTML report.

Works on the plaintext tables of the owner (never inside a protocol run): the
engine finds the optimum, this package describes the input and the output.
"""

from fedanon.report.risk import DEFAULT_THRESHOLD, table_risk
from fedanon.report.analysis import Analysis, analyze

__all__ = ["Analysis", "DEFAULT_THRESHOLD", "analyze", "table_risk"]

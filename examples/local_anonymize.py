"""Anonymize the bundled 8-row example with the engine's Python API and check the result.

Run: python examples/local_anonymize.py   (prints the optimum and the released rows)
"""

from pathlib import Path

import fedanon
from fedanon.engine import AnonymizationConfig, EncodedTable, Hierarchy, LDiversity, anonymize, read_table_csv
from fedanon.oracle.verify import verify_result

DATA = Path(fedanon.__file__).parent / "data" / "example"
QIS = ["age", "sex", "zipcode"]


def main() -> None:
    header, rows = read_table_csv(DATA / "example.csv")
    table = EncodedTable.from_rows(header, rows)
    hierarchies = {q: Hierarchy.read_csv(DATA / f"example_hierarchy_{q}.csv", q) for q in QIS}
    config = AnonymizationConfig(QIS, k=2, l_diversity=LDiversity("distinct", 2, "diagnosis"), suppression=0.25)
    result = anonymize(table, hierarchies, config)      # NoSolutionError if no node qualifies
    assert verify_result(table, hierarchies, config, result) == [], "the independent verifier disagrees"
    report = result.to_report()                         # the fields of `fedanon anonymize --report`
    print("transformation:", report["transformation"])
    print("suppressed rows:", report["suppressed_rows"], "of", len(rows))
    print("information loss:", report["information_loss"], f"({config.metric})")


if __name__ == "__main__":
    main()

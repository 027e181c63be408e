"""How risky is a table before and after anonymization: `fedanon.report.table_risk`.

Run: python examples/risk_check.py   (prints sample uniques, highest risk and the k the table satisfies)
"""

from pathlib import Path

import fedanon
from fedanon.engine import AnonymizationConfig, EncodedTable, Hierarchy, anonymize, read_table_csv
from fedanon.report import table_risk

ADULT = Path(fedanon.__file__).parent / "data" / "adult"
QIS = ["age", "sex", "race", "education"]


def summary(label: str, risk: dict) -> None:
    print(f"{label:>8}: {risk['classes']:>5} classes, {risk['sample_uniques']:>5} sample uniques, "
          f"highest prosecutor risk {risk['prosecutor']['highest']:.2f}, k = {risk['satisfies']['k']}")


def main() -> None:
    header, rows = read_table_csv(ADULT / "adult.csv")
    table = EncodedTable.from_rows(header, rows)
    summary("raw", table_risk(table, QIS))
    hierarchies = {q: Hierarchy.read_csv(ADULT / f"adult_hierarchy_{q}.csv", q) for q in QIS}
    result = anonymize(table, hierarchies, AnonymizationConfig(QIS, k=5, suppression=0.01))
    # the generalized table; suppressed rows are not released
    summary("released", table_risk(result.output, QIS, suppressed=result.suppressed))


if __name__ == "__main__":
    main()

"""Anonymize a pandas DataFrame with `fedanon.anonymize_frame`, hierarchies built from the data.

Run: python examples/frame_anonymize.py   (needs the `frame` extra: pandas)
"""

from pathlib import Path

import pandas as pd

import fedanon

ADULT = Path(fedanon.__file__).parent / "data" / "adult"


def main() -> None:
    df = pd.read_csv(ADULT / "adult.csv", sep=";")      # age stays int64: no astype(str) needed
    out, report = fedanon.anonymize_frame(
        df,
        {"age": "interval", "sex": "auto", "race": "auto",
         "education": str(ADULT / "adult_hierarchy_education.csv")},   # a builder name or an ARX CSV
        k=5, suppression=0.01,
        sensitive="salary-class", l_diversity="distinct:2",
        insensitive=["occupation"],                     # every other column is dropped
    )
    print("transformation:", report.transformation)
    print("suppressed rows:", int(report.suppressed.sum()), "of", len(df))
    print("dropped columns:", ", ".join(report.dropped_columns))
    risk = report.to_dict()["risk"]["output"]["prosecutor"]   # the same JSON as the CLI report
    print(f"highest prosecutor risk: {risk['highest']:.3f}")
    print(out.head())


if __name__ == "__main__":
    main()

"""Print the README's result tables from a finished run, ours beside the paper's numbers.

The paper's numbers come from condeval/crel/paper.yaml (through the report tables, which carry
them in ``paper_*`` columns), never from this script:

    python tools/readme_tables.py [--reports reports/crel/nonlinear]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import polars as pl

from condeval.crel.reports.synthetic import METHOD_LABELS

TABLE1_METHODS = {"crel": "CReL", "feldman": "Feldman et al.", "dqr": "DQR", "pcp": "PCP"}


def _cell(ours, reported, digits: int) -> str:
    fmt = lambda v: "—" if v is None else f"{v:.{digits}f}"  # noqa: E731
    return f"{fmt(ours)} ({fmt(reported)})"


def table1_rows(table: pl.DataFrame) -> list[str]:
    """Table 1 as the README shows it: the alphas the paper reports, every method."""
    lines = ["| α | method | coverage Z (paper) | coverage Y (paper) | area (paper) |", "|---|---|---|---|---|"]
    reported = table.filter(pl.col("paper_coverage_y").is_not_null())["alpha"].unique().to_list()
    for row in table.filter(pl.col("alpha").is_in(reported)).iter_rows(named=True):
        label = TABLE1_METHODS[row["method"]]
        if row["method"] == "dqr":
            label = row["detail"].split(" ")[0]
        lines.append(
            f"| {row['alpha']:g} | {label} | {_cell(row['coverage_z'], row['paper_coverage_z'], 4)} "
            f"| {_cell(row['coverage_y'], row['paper_coverage_y'], 4)} | {_cell(row['area'], row['paper_area'], 1)} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=Path, default=Path("reports/crel/nonlinear"))
    args = parser.parse_args()
    print("### Table 1\n")
    print("\n".join(table1_rows(pl.read_csv(args.reports / "table1.csv"))))
    for markdown in sorted((args.reports / "ablations").glob("table*.md")):
        print(f"\n### {markdown.stem}\n")
        print(markdown.read_text().rstrip())


assert set(TABLE1_METHODS) == set(METHOD_LABELS)

if __name__ == "__main__":
    main()

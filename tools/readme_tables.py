"""Print the README's result tables from a finished run, ours beside the paper's numbers.

The paper's numbers come from condeval/crel/paper.yaml (through the report tables, which carry
them in ``paper_*`` columns), never from this script:

    python tools/readme_tables.py [--reports reports/crel/nonlinear] [--i2t reports/crel_i2t]
"""

from __future__ import annotations

import argparse
import json
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
    parser.add_argument("--i2t", type=Path, default=Path("reports/crel_i2t"))
    parser.add_argument("--signal", type=Path, default=Path("results/encoders/signal.json"))
    args = parser.parse_args()
    if (args.reports / "table1.csv").exists():
        print("### Table 1\n")
        print("\n".join(table1_rows(pl.read_csv(args.reports / "table1.csv"))))
    for markdown in sorted((args.reports / "ablations").glob("table*.md")):
        print(f"\n### {markdown.stem}\n")
        print(markdown.read_text().rstrip())
    for markdown in sorted(args.i2t.glob("table2_*.md")):
        print(f"\n### Table 2 ({markdown.stem})\n")
        print(markdown.read_text().rstrip())
    if args.signal.exists():
        signal = json.loads(args.signal.read_text())
        clip, bert = signal["clip"], signal["bert"]
        print(f"\n### Encoder signal\n\nCLIP: R@1 {clip['R@1']:.3f}, R@5 {clip['R@5']:.3f} in a {clip['gallery']}-image gallery "
              f"(chance {clip['chance@1']:.3f} / {clip['chance@5']:.3f}); one-noun foil: gap {clip['foil_gap_mean']:.4f} "
              f"± {clip['foil_gap_std']:.4f}, true caption wins {clip['foil_true_wins']:.1%}. BERT: same image "
              f"{bert['same_image_mean']:.3f}, other image {bert['other_image_mean']:.3f}, AUC {bert['auc']:.3f}.")  # fmt: skip


assert set(TABLE1_METHODS) == set(METHOD_LABELS)

if __name__ == "__main__":
    main()

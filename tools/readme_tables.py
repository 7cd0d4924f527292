"""Fill the generated result tables of docs/*.md from a finished run, ours beside the paper's numbers.

Each table lives in a docs file between two markers, which this script replaces with the run's table:

    <!-- generated: table1 -->

    ...

    <!-- /generated: table1 -->

Blocks: ``table1`` (CReL Table 1), one per Appendix C ablation table (``table4_beta``, ...), one per
image-to-text Table 2 (``table2_alpha0.1``, ...), ``encoder_signal``, ``sources`` (the catalogue
``config/sources.yaml``, which needs no run), ``reports/<path>`` (any Markdown table the run wrote,
e.g. ``reports/trust/selection_table`` for ``reports/trust/selection_table.md``) and ``provenance``
(the one line naming the run: commit, date, machine, config). A block that no docs file marks is
printed instead. The paper's numbers come from condeval/crel/paper.yaml (through the
report tables, which carry them in ``paper_*`` columns), never from this script:

    python tools/readme_tables.py --write [--docs docs] [--reports reports/crel/nonlinear] [--i2t reports/crel_i2t]
        [--run .] [--config config/config.yaml]

Without ``--write`` every block is printed and nothing is written.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import polars as pl

from condeval.core.fetch import catalogue_table, read_catalog
from condeval.core.io import atomic_path
from condeval.crel.reports.synthetic import METHOD_LABELS, ours_paper_cell

TABLE1_METHODS = {"crel": "CReL", "feldman": "Feldman et al.", "dqr": "DQR", "pcp": "PCP"}
MARKED_BLOCK = re.compile(
    r"(?P<begin><!-- generated: (?P<name>[\w./-]+) -->\n).*?(?P<end><!-- /generated: (?P=name) -->)", re.DOTALL
)
BEGIN_MARKER = re.compile(r"<!-- generated: ([\w./-]+) -->")


def table1_rows(table: pl.DataFrame) -> list[str]:
    """Table 1 as docs/crel/results.md shows it: the alphas the paper reports, every method."""
    lines = [
        "| α | method | coverage Z [95%] (paper) | coverage Y [95%] (paper) | area [95%] (paper) |",
        "|---|---|---|---|---|",
    ]
    reported = table.filter(pl.col("paper_coverage_y").is_not_null())["alpha"].unique().to_list()
    for row in table.filter(pl.col("alpha").is_in(reported)).iter_rows(named=True):
        label = TABLE1_METHODS[row["method"]]
        if row["method"] == "dqr":
            label = row["detail"].split(" ")[0]
        lines.append(
            f"| {row['alpha']:g} | {label} | {ours_paper_cell(row, 'coverage_z')} "
            f"| {ours_paper_cell(row, 'coverage_y')} | {ours_paper_cell(row, 'area', 1)} |"
        )
    return lines


def signal_sentence(signal: dict) -> str:
    """The encoders' measured signal (``results/encoders/signal.json``) in one paragraph."""
    clip, bert = signal["clip"], signal["bert"]
    return (
        f"CLIP: R@1 {clip['R@1']:.3f}, R@5 {clip['R@5']:.3f} in a {clip['gallery']}-image gallery "
        f"(chance {clip['chance@1']:.3f} / {clip['chance@5']:.3f}); one-noun foil: gap {clip['foil_gap_mean']:.4f} "
        f"± {clip['foil_gap_std']:.4f}, true caption wins {clip['foil_true_wins']:.1%}. BERT: same image "
        f"{bert['same_image_mean']:.3f}, other image {bert['other_image_mean']:.3f}, AUC {bert['auc']:.3f}."
    )


def report_blocks(run: Path) -> dict[str, str]:
    """Every Markdown table under the run's ``reports/`` folder, by ``reports/<path without .md>``."""
    return {
        markdown.relative_to(run).with_suffix("").as_posix(): markdown.read_text().rstrip()
        for markdown in sorted((run / "reports").rglob("*.md"))
    }


def provenance(run: Path, configs: list[Path]) -> str:
    """The run's one provenance line: the commit it ran, the day its last report was written, the machine
    and the config files."""
    import datetime
    import os
    import platform
    import subprocess

    written = max((path.stat().st_mtime for path in (run / "reports").rglob("*.md")), default=None)
    day = datetime.date.fromtimestamp(written) if written else datetime.date.today()

    commit = subprocess.run(["git", "-C", str(run), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    commit = commit.stdout.strip() or "unknown"
    machine = f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()}"
    return (
        f"Generated from one run of commit {commit} on {day.isoformat()} ({machine}; "
        f"config {', '.join(f'`{c}`' for c in configs)}) by `tools/readme_tables.py`."
    )


def generated_blocks(reports: Path, i2t: Path, signal: Path, sources: Path | None = None) -> dict[str, str]:
    """Every CReL table a run has written, and the catalogue ``sources``, by block name, as Markdown."""
    blocks = {} if sources is None else {"sources": "\n".join(catalogue_table(read_catalog(sources)))}
    if (reports / "table1.csv").exists():
        blocks["table1"] = "\n".join(table1_rows(pl.read_csv(reports / "table1.csv")))
    for markdown in sorted((reports / "ablations").glob("table*.md")):
        blocks[markdown.stem] = markdown.read_text().rstrip()
    for markdown in sorted(i2t.glob("table2_*.md")):
        blocks[markdown.stem] = markdown.read_text().rstrip()
    if signal.exists():
        blocks["encoder_signal"] = signal_sentence(json.loads(signal.read_text()))
    return blocks


def fill_markers(text: str, blocks: dict[str, str], source: Path) -> tuple[str, set[str]]:
    """Replace each marked block of ``text`` that ``blocks`` holds; return the text and the names filled.

    Raises
    ------
    ValueError
        If a begin marker of ``source`` has no matching end marker.
    """
    closed = {match["name"] for match in MARKED_BLOCK.finditer(text)}
    unclosed = [name for name in BEGIN_MARKER.findall(text) if name not in closed]
    if unclosed:
        raise ValueError(f"{source}: block {unclosed[0]!r} has no '<!-- /generated: {unclosed[0]} -->' marker")
    filled = set()

    def replace(match: re.Match) -> str:
        if match["name"] not in blocks:
            return match[0]
        filled.add(match["name"])
        # blank lines around the block keep the markers out of a Markdown table
        return f"{match['begin']}\n{blocks[match['name']]}\n\n{match['end']}"

    return MARKED_BLOCK.sub(replace, text), filled


def write_docs(docs: Path, blocks: dict[str, str]) -> set[str]:
    """Fill the marked blocks of every Markdown file under ``docs`` (atomic writes); return the names placed."""
    placed = set()
    for markdown in sorted(docs.rglob("*.md")):
        text = markdown.read_text()
        new_text, filled = fill_markers(text, blocks, markdown)
        placed |= filled
        if new_text != text:
            with atomic_path(markdown) as tmp:
                tmp.write_text(new_text)
    return placed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=Path, default=Path("reports/crel/nonlinear"))
    parser.add_argument("--i2t", type=Path, default=Path("reports/crel_i2t"))
    parser.add_argument("--signal", type=Path, default=Path("results/encoders/signal.json"))
    parser.add_argument("--sources", type=Path, default=Path("config/sources.yaml"))
    parser.add_argument("--docs", type=Path, default=Path("docs"))
    parser.add_argument("--run", type=Path, default=Path("."), help="the finished run's folder (its reports/)")
    parser.add_argument("--config", type=Path, action="append", help="the run's config file(s), for provenance")
    parser.add_argument("--write", action="store_true", help="fill the marked blocks of the pages under DOCS")
    args = parser.parse_args()
    blocks = generated_blocks(args.reports, args.i2t, args.signal, args.sources) | report_blocks(args.run)
    blocks["provenance"] = provenance(args.run, args.config or [Path("config/config.yaml")])
    placed = write_docs(args.docs, blocks) if args.write else set()
    for name in sorted(placed):
        print(f"wrote block {name}")
    for name, markdown in blocks.items():
        if name not in placed:
            print(f"\n### {name}\n\n{markdown}")


assert set(TABLE1_METHODS) == set(METHOD_LABELS)

if __name__ == "__main__":
    main()

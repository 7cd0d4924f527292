"""Fill the generated result tables of docs/*.md from a finished run, ours beside the paper's numbers.

Each table lives in a docs file between two markers, which this script replaces with the run's table:

    <!-- generated: table1 -->

    ...

    <!-- /generated: table1 -->

Blocks: ``table1`` (CReL Table 1), one per Appendix C ablation table (``table4_beta``, ...) and
``num_z0`` (Appendix C.8), one per image-to-text Table 2 (``table2_alpha0.1``, ...), ``encoder_signal``
and ``generator_signal`` (what the image-to-text encoders and the text-to-image generators read),
``morphology_deciles_<regime>`` (the trust track's Fig. 3 in CellProfiler space), ``sources`` (the catalogue
``config/sources.yaml``, which needs no run), ``reports/<path>`` (any Markdown table the run wrote,
e.g. ``reports/trust/selection_table`` for ``reports/trust/selection_table.md``), ``provenance``
(the one line naming the run: commit, date, machine, config), and from the benchmarks' recorded outputs
in ``benchmarks/out/`` (a committed file there is the measurement the docs cite; a missing one is named
with the command that records it) ``benchmark_trust`` (the trust track's benchmark table) and
``benchmark_allocator`` (the allocator settings' speed-up). A block that no docs file marks is
printed instead. The paper's numbers come from condeval/crel/paper.yaml (through the
report tables, which carry them in ``paper_*`` columns), never from this script:

    python tools/readme_tables.py --write [--docs docs] [--reports reports/crel/nonlinear] [--i2t reports/crel_i2t]
        [--signal results/encoders/signal.json] [--t2i-signal results/crel_t2i/signal.json] [--run .]
        [--config config/config.yaml] [--benchmarks benchmarks/out]

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
from condeval.core.tables import with_bounds
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


def encoder_signal_rows(signal: dict) -> list[str]:
    """What the image-to-text encoders read (``results/encoders/signal.json``): each share with its 95%
    interval over the images in brackets, chance in parentheses."""
    clip, bert = signal["clip"], signal["bert"]
    return [
        "| encoder | measure | value |",
        "|---|---|---|",
        f"| CLIP | image → caption retrieval in a {clip['gallery']:,}-image gallery, R@1 / R@5 "
        f"| {with_bounds(clip, 'R@1')} / {with_bounds(clip, 'R@5')} ({clip['chance@1']:.3f} / {clip['chance@5']:.3f}) |",
        f"| CLIP | shape named, {clip['naming_images']:,} lone objects of the {clip['naming_shapes']} trained shapes "
        f"| {with_bounds(clip, 'naming_accuracy')} ({clip['naming_chance']:.2f}) |",
        f"| CLIP | the true caption beats its one-noun foil | {with_bounds(clip, 'foil_true_wins')} (0.5) |",
        f"| CLIP | true-pair cosine: mean; share at or below 0 "
        f"| {clip['matching_cos_mean']:.3f}; {clip['matching_cos_le_0']:.1%} |",
        f"| BERT | cosine of two captions of the same image / of different images "
        f"| {bert['same_image_mean']:.3f} / {bert['other_image_mean']:.3f}, AUC {with_bounds(bert, 'auc')} |",
    ]


def generator_signal_rows(signal: dict) -> list[str]:
    """DINO-SIM's signal and each text-to-image generator's (``results/crel_t2i/signal.json``): DINO-SIM's
    means and AUC, retrieval R@5, colour and shape read by the probe and the CLIP zero-shot, each with its
    95% interval over the images in brackets, and the probe on shuffled requests."""
    dino, models = signal["dino"], signal["models"]
    lines = [
        "| DINO-SIM | a scene and a fresh render of it | two scenes sharing a coloured shape | AUC |",
        "|---|---|---|---|",
        f"| mean cosine | {with_bounds(dino, 'same_scene_mean')} | {with_bounds(dino, 'shared_element_mean')} "
        f"| {with_bounds(dino, 'auc')} |",
        "",
        "| model | R@5 | colour (probe) | shape (probe) | colour / shape (zero-shot) | shuffled colour / shape (probe) |",
        "|---|---|---|---|---|---|",
    ]
    first = models[min(models)]
    probe, zero_shot = first["attributes_probe"]["real"], first["attributes"]["real"]
    lines.append(
        f"| real images | {with_bounds(first['real'], 'R@5')} | {with_bounds(probe, 'colour')} "
        f"| {with_bounds(probe, 'shape')} | {with_bounds(zero_shot, 'colour')} / {with_bounds(zero_shot, 'shape')} | |"
    )
    for name, model in sorted(models.items()):
        probe, zero_shot = model["attributes_probe"], model["attributes"]["generated"]
        lines.append(
            f"| {name} | {with_bounds(model['generated'], 'R@5')} | {with_bounds(probe['generated'], 'colour')} "
            f"| {with_bounds(probe['generated'], 'shape')} "
            f"| {with_bounds(zero_shot, 'colour')} / {with_bounds(zero_shot, 'shape')} "
            f"| {probe['shuffled']['colour']:.3f} / {probe['shuffled']['shape']:.3f} |"
        )
    return lines


def num_z0_rows(curve: pl.DataFrame, seeds: pl.DataFrame) -> list[str]:
    """Appendix C.8 on the synthetic data: CReL-ρ against the number of starts, each with its 95% interval over
    the test points in brackets, and its spread over optimizer seeds beside the paper's Table 13."""
    metric = f"CReL-{curve['metric'][0].upper()}"
    row = seeds.row(0, named=True)
    return [
        "| num_z0 | " + " | ".join(str(k) for k in curve["num_z0"]) + " |",
        "|---|" + "---|" * curve.height,
        f"| {metric} | "
        + " | ".join(with_bounds(row, "crel_rho_mean", 4) for row in curve.iter_rows(named=True))
        + " |",
        "",
        "| runs | num_z0 | mean | standard deviation | paper (Table 13: image-to-text, BLIP-base, CLIP-SIM) |",
        "|---|---|---|---|---|",
        f"| {row['runs']} | {row['num_z0']} | {row['crel_rho_mean']:.4f} | {row['crel_rho_std']:.5f} "
        f"| {row['paper_std']:.5f} |",
    ]


def morphology_decile_rows(deciles: dict[str, pl.DataFrame]) -> list[str]:
    """Fig. 3 (``results/trust/rxrx1/<regime>/morphology/<model>-deciles.parquet``): per model and target,
    the real-trained classifier's accuracy in each trust bin, most → least trusted, and the last bin's
    change from the first with its 95% interval over conditions."""
    lines = [
        "| model | cell type: accuracy by bin | cell type: last − first (95% CI) "
        "| condition: accuracy by bin | condition: last − first (95% CI) |",
        "|---|---|---|---|---|",
    ]
    for model, frame in deciles.items():
        cells = []
        for target in ("cell type", "condition"):
            bins = frame.filter(pl.col("target") == target).sort("bin")
            last = bins.row(bins.height - 1, named=True)
            cells.append(", ".join(f"{a:.2f}" for a in bins["accuracy"]))
            change, low, high = (round(last[f"accuracy_change{end}"], 2) + 0.0 for end in ("", "_low", "_high"))
            cells.append(f"{change:+.2f} ({low:+.2f}, {high:+.2f})")  # + 0.0: no "-0.00"
        lines.append(f"| {model} | " + " | ".join(cells) + " |")
    return lines


def morphology_blocks(run: Path) -> dict[str, str]:
    """``morphology_deciles_<regime>`` for each RxRx1 regime the run measured in CellProfiler space."""
    blocks = {}
    for folder in sorted((run / "results" / "trust" / "rxrx1").glob("*/morphology")):
        deciles = {
            path.name.removesuffix("-deciles.parquet"): pl.read_parquet(path)
            for path in sorted(folder.glob("*-deciles.parquet"))
        }
        if deciles:
            blocks[f"morphology_deciles_{folder.parent.name}"] = "\n".join(morphology_decile_rows(deciles))
    return blocks


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


def generated_blocks(
    reports: Path, i2t: Path, signal: Path, sources: Path | None = None, t2i_signal: Path | None = None
) -> dict[str, str]:
    """Every CReL table a run has written, and the catalogue ``sources``, by block name, as Markdown."""
    blocks = {} if sources is None else {"sources": "\n".join(catalogue_table(read_catalog(sources)))}
    if (reports / "table1.csv").exists():
        blocks["table1"] = "\n".join(table1_rows(pl.read_csv(reports / "table1.csv")))
    for markdown in sorted((reports / "ablations").glob("table*.md")):
        blocks[markdown.stem] = markdown.read_text().rstrip()
    if (reports / "ablations" / "num_z0.csv").exists():
        curve, seeds = (pl.read_csv(reports / "ablations" / f"{name}.csv") for name in ("num_z0", "table13_seeds"))
        blocks["num_z0"] = "\n".join(num_z0_rows(curve, seeds))
    for markdown in sorted(i2t.glob("table2_*.md")):
        blocks[markdown.stem] = markdown.read_text().rstrip()
    if signal.exists():
        blocks["encoder_signal"] = "\n".join(encoder_signal_rows(json.loads(signal.read_text())))
    if t2i_signal is not None and t2i_signal.exists():
        blocks["generator_signal"] = "\n".join(generator_signal_rows(json.loads(t2i_signal.read_text())))
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


#: A row's cells where its benchmark has no recorded output.
NOT_RECORDED = "not recorded: run `{command}`"


def _read(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.exists() else None


def _cpu(threads: int) -> str:
    return f"{threads} CPU thread{'s' if threads != 1 else ''}"


def trust_rows(folder: Path) -> list[str]:
    """The trust track's benchmark table: the score against the definition, the translator against
    decoding and encoding, abstention's saving, and the generators on each recorded device."""
    lines = ["| benchmark | where | result |", "|---|---|---|"]
    lines += _score_rows(_read(folder / "trust.json"))
    lines += _translator_rows(_read(folder / "translator.json"))
    devices = sorted(folder.glob("trust_device*.json"))
    lines += [_device_row(_read(path)) for path in devices] or [
        "| `benchmarks/bench_trust_device.py`, the generators' training and sampling | — | "
        + NOT_RECORDED.format(command="python benchmarks/bench_trust_device.py --device cuda")
        + " |"
    ]
    return lines


def _score_rows(record: dict | None) -> list[str]:
    what = "`benchmarks/bench_trust.py`: `TrustScorer.score` at D = 768 against the definition's quadratic forms"
    if record is None:
        return [f"| {what} | — | {NOT_RECORDED.format(command='make bench-trust')} |"]
    base, where = record["definition_baseline"]["samples_per_s"], _cpu(record["threads"])
    kid, reference = record["kid"]["condeval_standard"]["seconds"], record["kid"]["torchmetrics_standard"]["seconds"]
    return [
        f"| {what} | {where} | {record['samples_per_s']:,.0f} against {base:,.0f} samples/s "
        f"({record['speed_up']:,.0f}×) |",
        f"| the same: `kid` (polynomial kernel, 10 subsets of 500) against torchmetrics' `KernelInceptionDistance` "
        f"| {where} | {kid:.2f} against {reference:.2f} s ({reference / kid:.1f}×) |",
    ]


def _translator_rows(record: dict | None) -> list[str]:
    what = (
        "`benchmarks/bench_translator.py`: translator plus `TrustScorer.score` in 1152-D, against decoding "
        "with SD's `AutoencoderKL` and encoding with SigLIP so400m"
    )
    if record is None:
        return [f"| {what} | — | {NOT_RECORDED.format(command='python benchmarks/bench_translator.py')} |"]
    rates, where = record["samples_per_s"], _cpu(record["threads"])
    rows = [
        f"| {what} | {where} | {rates['translator_score']:,.0f} against {rates['decode_encode']:.2f} samples/s "
        f"({record['speed_up']:,.0f}×) |"
    ]
    if "abstention_measured" in record:
        run = record["abstention_measured"]
        rows.append(
            f"| the same: {run['images']} images in {run['steps']} steps, {run['abstained']} abstaining at step "
            f"{run['at']} (`TrustAbstention(drop=True)`) | {where} | {100 * run['saving']:.0f}% of the call's time "
            f"saved; `compute_saved` predicts {100 * run['predicted_saving']:.0f}% |"
        )
    return rows


def _device_row(record: dict) -> str:
    shape = "the paper's shapes" if record["scale"] == "paper" else "the offline default's generator"
    where = f"one {record['gpu']}" if record.get("gpu") else _cpu(record["cpus"])
    rates = "; ".join(
        f"{variant}: trains at {row['train_images_per_s']:,.0f} and samples at {row['samples_per_s']:,.1f} "
        f"images/s ({record['shape']['steps']} steps)"
        for variant, row in record["variants"].items()
    )
    memory = f"; {record['peak_gpu_memory_gib']:.0f} GiB at most" if record.get("peak_gpu_memory_gib") else ""
    return f"| `benchmarks/bench_trust_device.py`, {shape} | {where} | {rates}{memory} |"


def allocator_sentence(folder: Path) -> str:
    """The allocator's speed-up on the image-to-text DQR step, as ``make bench-i2t`` recorded it."""
    record = _read(folder / "allocator.json")
    if record is None:
        return NOT_RECORDED.format(command="python benchmarks/bench_allocator.py") + "."
    seconds = record["dqr_step_seconds"]
    return (
        f"{seconds['glibc_default']:.3f} s a step with glibc's defaults, {seconds['job_environment']:.3f} s with "
        f"the job environment ({record['speedup']:.1f}× on {record['machine']['cpu_count']} CPU cores)."
    )


def benchmark_blocks(folder: Path) -> dict[str, str]:
    """Every benchmark block, by name, from the recorded outputs in ``folder``."""
    return {"benchmark_trust": "\n".join(trust_rows(folder)), "benchmark_allocator": allocator_sentence(folder)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=Path, default=Path("reports/crel/nonlinear"))
    parser.add_argument("--i2t", type=Path, default=Path("reports/crel_i2t"))
    parser.add_argument("--signal", type=Path, default=Path("results/encoders/signal.json"))
    parser.add_argument("--t2i-signal", type=Path, default=Path("results/crel_t2i/signal.json"))
    parser.add_argument("--sources", type=Path, default=Path("config/sources.yaml"))
    parser.add_argument("--docs", type=Path, default=Path("docs"))
    parser.add_argument(
        "--benchmarks", type=Path, default=Path("benchmarks/out"), help="the benchmarks' recorded outputs"
    )
    parser.add_argument("--run", type=Path, default=Path("."), help="the finished run's folder (its reports/)")
    parser.add_argument("--config", type=Path, action="append", help="the run's config file(s), for provenance")
    parser.add_argument("--write", action="store_true", help="fill the marked blocks of the pages under DOCS")
    args = parser.parse_args()
    blocks = generated_blocks(args.reports, args.i2t, args.signal, args.sources, args.t2i_signal)
    blocks |= report_blocks(args.run) | morphology_blocks(args.run) | benchmark_blocks(args.benchmarks)
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

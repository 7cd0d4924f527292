"""tools/readme_tables.py fills the marked tables of docs/*.md from a run and nothing else."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import polars as pl
import pytest

from condeval.crel.design import ABLATION_TABLES

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("readme_tables", ROOT / "tools" / "readme_tables.py")
readme_tables = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(readme_tables)


def _fake_run(tmp_path: Path) -> Path:
    reports = tmp_path / "reports"
    (reports / "ablations").mkdir(parents=True)
    pl.DataFrame(
        {
            "alpha": [0.1, 0.1, 0.05],
            "method": ["crel", "dqr", "crel"],
            "detail": ["", "DQR-0.01 (level)", ""],
            "coverage_z": [0.891, 0.925, 0.95],
            "coverage_y": [0.8965, 0.9295, 0.95],
            "area": [782.14, 967.3, 500.0],
            "paper_coverage_z": [0.8953, 0.8823, None],
            "paper_coverage_y": [0.8915, 0.9145, None],
            "paper_area": [232.7, 287.4, None],
        }
    ).write_csv(reports / "table1.csv")
    (reports / "ablations" / "table4_beta.md").write_text("| setting |\n|---|\n| 0.1 |\n")
    return reports


def test_write_fills_marked_blocks_and_keeps_the_prose(tmp_path):
    reports = _fake_run(tmp_path)
    docs = tmp_path / "docs"
    (docs / "crel").mkdir(parents=True)
    page = docs / "crel" / "results.md"  # pages in subfolders are filled too
    page.write_text(
        "Reading before.\n\n<!-- generated: table1 -->\n\nold table\n\n<!-- /generated: table1 -->\n\nBetween.\n\n"
        "<!-- generated: table4_beta -->\nstale\n<!-- /generated: table4_beta -->\nAfter.\n"
    )
    blocks = readme_tables.generated_blocks(reports, tmp_path / "no-i2t", tmp_path / "no-signal.json")

    placed = readme_tables.write_docs(docs, blocks)

    assert placed == {"table1", "table4_beta"}
    text = page.read_text()
    assert "old table" not in text and "stale" not in text
    assert "| 0.1 | CReL | 0.8910 (0.8953) | 0.8965 (0.8915) | 782.1 (232.7) |" in text
    assert "| 0.1 | DQR-0.01 |" in text and "| 0.05 |" not in text  # only the alphas the paper reports
    assert text.startswith("Reading before.\n\n<!-- generated: table1 -->\n\n| α |")
    assert "|\n\n<!-- /generated: table1 -->\n\nBetween.\n\n<!-- generated: table4_beta -->\n\n| setting |" in text
    assert text.endswith("| 0.1 |\n\n<!-- /generated: table4_beta -->\nAfter.\n")
    assert readme_tables.write_docs(docs, blocks) == placed and page.read_text() == text  # idempotent


def test_an_unclosed_marker_names_the_file_and_block(tmp_path):
    page = tmp_path / "crel.md"
    page.write_text("<!-- generated: table1 -->\n| a |\n")
    with pytest.raises(ValueError, match=r"crel\.md: block 'table1'"):
        readme_tables.write_docs(tmp_path, {"table1": "| b |"})
    assert page.read_text() == "<!-- generated: table1 -->\n| a |\n"


def test_docs_mark_table1_and_every_appendix_c_table():
    text = (ROOT / "docs" / "crel" / "results.md").read_text()
    marked = {match["name"] for match in readme_tables.MARKED_BLOCK.finditer(text)}
    assert {"table1", *ABLATION_TABLES, "num_z0", "encoder_signal", "generator_signal"} <= marked


def test_any_report_table_of_a_run_fills_its_block_and_the_provenance_names_the_run(tmp_path):
    (tmp_path / "reports" / "trust").mkdir(parents=True)
    (tmp_path / "reports" / "trust" / "selection_table.md").write_text("| dataset |\n|---|\n| celeba |\n")
    blocks = readme_tables.report_blocks(tmp_path)
    assert blocks == {"reports/trust/selection_table": "| dataset |\n|---|\n| celeba |"}
    page = tmp_path / "docs" / "trust" / "results.md"
    page.parent.mkdir(parents=True)
    page.write_text(
        "<!-- generated: reports/trust/selection_table -->\nold\n<!-- /generated: reports/trust/selection_table -->\n"
    )
    assert readme_tables.write_docs(tmp_path / "docs", blocks) == {"reports/trust/selection_table"}
    assert "| celeba |" in page.read_text() and "old" not in page.read_text()
    line = readme_tables.provenance(ROOT, [Path("config/config.yaml")])
    assert line.startswith("Generated from one run of commit ") and "`config/config.yaml`" in line


def test_the_signal_and_num_z0_blocks_are_read_from_the_runs_files(tmp_path):
    clip = {"gallery": 1000, "R@1": 0.222, "R@5": 0.504, "chance@1": 0.001, "chance@5": 0.005}
    clip |= {"naming_images": 820, "naming_shapes": 10, "naming_accuracy": 0.672, "naming_chance": 0.1}
    clip |= {"foil_true_wins": 0.805, "matching_cos_mean": 0.624, "matching_cos_le_0": 0.001}
    bert = {"same_image_mean": 0.714, "other_image_mean": 0.638, "auc": 0.584}
    encoders = "\n".join(readme_tables.encoder_signal_rows({"clip": clip, "bert": bert}))
    assert "| 0.222 / 0.504 (0.001 / 0.005) |" in encoders and "| 0.714 / 0.638, AUC 0.584 |" in encoders
    assert "820 lone objects of the 10 trained shapes | 0.672 (0.10) |" in encoders and "; 0.1% |" in encoders

    read = {"colour": 0.9, "shape": 0.7}
    model = {
        "real": {"R@5": 0.48},
        "generated": {"R@5": 0.061},
        "attributes": {"real": read, "generated": {"colour": 0.62, "shape": 0.13}},
        "attributes_probe": {"real": read, "generated": {"colour": 0.55, "shape": 0.12}, "shuffled": read},
    }
    dino = {"same_scene_mean": 0.949, "shared_element_mean": 0.186, "auc": 0.98}
    generators = "\n".join(readme_tables.generator_signal_rows({"dino": dino, "models": {"mini-flux": model}}))
    assert "| mean cosine | 0.949 | 0.186 | 0.980 |" in generators
    assert "| real images | 0.480 | 0.900 | 0.700 | 0.900 / 0.700 | |" in generators
    assert "| mini-flux | 0.061 | 0.550 | 0.120 | 0.620 / 0.130 | 0.900 / 0.700 |" in generators

    clip |= {"R@5_low": 0.473, "R@5_high": 0.535, "naming_accuracy_low": 0.64, "naming_accuracy_high": 0.70}
    bounded = "\n".join(
        readme_tables.encoder_signal_rows({"clip": clip, "bert": bert | {"auc_low": 0.55, "auc_high": 0.61}})
    )
    assert "| 0.222 / 0.504 [0.473–0.535] (0.001 / 0.005) |" in bounded and "AUC 0.584 [0.550–0.610] |" in bounded
    assert "| 0.672 [0.640–0.700] (0.10) |" in bounded
    model["generated"] |= {"R@5_low": 0.04, "R@5_high": 0.09}
    dino |= {"auc_low": 0.97, "auc_high": 0.99}
    generators = "\n".join(readme_tables.generator_signal_rows({"dino": dino, "models": {"mini-flux": model}}))
    assert "| mini-flux | 0.061 [0.040–0.090] | 0.550 |" in generators
    assert "| mean cosine | 0.949 | 0.186 | 0.980 [0.970–0.990] |" in generators

    curve = pl.DataFrame({"num_z0": [1, 5], "crel_rho_mean": [-0.45, -0.47], "metric": "mse", "alpha": 0.1})
    curve = curve.with_columns(
        crel_rho_mean_low=pl.Series([-0.46, float("nan")]), crel_rho_mean_high=pl.Series([-0.44, -0.46])
    )
    seeds = pl.DataFrame(
        {"runs": [10], "num_z0": [50], "crel_rho_mean": [-0.4915], "crel_rho_std": [0.00058], "paper_std": [0.00027]}
    )
    rows = readme_tables.num_z0_rows(curve, seeds)
    assert rows[:3] == ["| num_z0 | 1 | 5 |", "|---|---|---|", "| CReL-MSE | -0.4500 [-0.4600–-0.4400] | -0.4700 |"]
    assert rows[-1] == "| 10 | 50 | -0.4915 | 0.00058 | 0.00027 |"


def test_the_morphology_deciles_block_reads_each_models_bins_and_change(tmp_path):
    folder = tmp_path / "results" / "trust" / "rxrx1" / "held_out" / "morphology"
    folder.mkdir(parents=True)
    pl.DataFrame(
        {
            "bin": [0, 1, 0, 1],
            "accuracy": [0.625, 0.25, 0.125, 0.125],
            "accuracy_change": [0.0, -0.375, 0.0, -3.7e-17],
            "accuracy_change_low": [0.0, -1.0, 0.0, -0.3],
            "accuracy_change_high": [0.0, 0.5, 0.0, 0.75],
            "target": ["cell type", "cell type", "condition", "condition"],
        }
    ).write_parquet(folder / "vanilla-deciles.parquet")
    blocks = readme_tables.morphology_blocks(tmp_path)
    assert list(blocks) == ["morphology_deciles_held_out"]
    row = blocks["morphology_deciles_held_out"].splitlines()[-1]
    assert row == "| vanilla | 0.62, 0.25 | -0.38 (-1.00, +0.50) | 0.12, 0.12 | +0.00 (-0.30, +0.75) |"


def test_the_benchmark_blocks_read_the_recorded_outputs_and_name_the_missing_ones(tmp_path):
    """A figure the docs cite comes from its benchmark's recorded output; a missing output is named with
    the command that records it, never filled with a typed number."""
    import json

    missing = readme_tables.benchmark_blocks(tmp_path)
    assert "not recorded: run `make bench-trust`" in missing["benchmark_trust"]
    assert missing["benchmark_allocator"] == "not recorded: run `python benchmarks/bench_allocator.py`."

    rates = {"translator_score": 7411.2, "decode_encode": 0.1412, "denoiser_step": 2.0}
    abstention = {"images": 4, "steps": 10, "at": 2, "abstained": 2, "saving": 0.371, "predicted_saving": 0.432}
    translator = {"threads": 2, "samples_per_s": rates, "speed_up": 52487.0, "abstention_measured": abstention}
    device = {"scale": "paper", "gpu": "NVIDIA H100 80GB HBM3", "cpus": 16, "shape": {"steps": 250}}
    device |= {"variants": {"repa": {"train_images_per_s": 285.4, "samples_per_s": 3.21}}, "peak_gpu_memory_gib": 55.2}
    allocator = {"dqr_step_seconds": {"glibc_default": 0.5, "job_environment": 0.25}, "speedup": 2.0}
    allocator |= {"machine": {"cpu_count": 2}}
    score = {
        "threads": 2,
        "samples_per_s": 117370.0,
        "speed_up": 15.43,
        "definition_baseline": {"samples_per_s": 7608.0},
    }
    score |= {"kid": {"condeval_standard": {"seconds": 0.2}, "torchmetrics_standard": {"seconds": 0.4}}}
    records = {"translator": translator, "trust_device_paper": device, "allocator": allocator, "trust": score}
    for name, record in records.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(record))
    blocks = readme_tables.benchmark_blocks(tmp_path)
    trust = blocks["benchmark_trust"]
    assert "| 2 CPU threads | 7,411 against 0.14 samples/s (52,487×) |" in trust
    assert (
        "2 abstaining at step 2 (`TrustAbstention(drop=True)`) | 2 CPU threads | 37% of the call's time saved" in trust
    )
    assert "| one NVIDIA H100 80GB HBM3 | repa: trains at 285 and samples at 3.2 images/s (250 steps); 55 GiB" in trust
    assert "| 2 CPU threads | 117,370 against 7,608 samples/s (15×) |" in trust
    assert "| 2 CPU threads | 0.20 against 0.40 s (2.0×) |" in trust
    assert blocks["benchmark_allocator"].startswith("0.500 s a step with glibc's defaults, 0.250 s")
    assert "(2.0× on 2 CPU cores)" in blocks["benchmark_allocator"]

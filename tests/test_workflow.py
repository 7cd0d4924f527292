"""End to end: the tiny config runs the whole DAG; an alpha edit reruns only alpha-dependent jobs."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile")]
TRAINING_RULES = {"generate_synthetic", "split_folds", "preprocess", "train_vae", "train_cvae", "encode_latents", "train_dqr"}
ALPHA_RULES = {
    "evaluate_crel",
    "crel_reliability",
    "evaluate_feldman",
    "evaluate_dqr",
    "evaluate_pcp",
    "table1",
    "coverage_vs_alpha",
    "fig2_regions",
    "reliability_table",
    "all",
}

pytestmark = pytest.mark.slow


def _snakemake(workdir, *args, timeout=600):
    result = subprocess.run(
        SNAKEMAKE + ["-d", str(workdir), "--cores", "2", *args], capture_output=True, text=True, timeout=timeout
    )
    return result


def _job_counts(dry_run_stdout):
    """Rule -> count from the 'Job stats' table of a dry run."""
    counts = {}
    block = dry_run_stdout.split("Job stats:")[-1] if "Job stats:" in dry_run_stdout else ""
    for line in block.splitlines():
        match = re.match(r"^(\w+)\s+(\d+)$", line.strip())
        if match and match.group(1) != "total":
            counts[match.group(1)] = int(match.group(2))
    return counts


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("workflow")
    (workdir / "config").mkdir()
    shutil.copy(REPO / ".test/config/config.yaml", workdir / "config/config.yaml")
    result = _snakemake(workdir)
    assert result.returncode == 0, result.stderr[-5000:]
    return workdir


def test_whole_dag_produces_every_table_and_figure(finished_run):
    report_dir = finished_run / "reports/crel/nonlinear"
    for name in ("table1.csv", "table1.md", "table1.png", "coverage_vs_alpha.png", "fig2_regions.png", "fig5_vae_vs_cvae.png", "reliability.csv", "lgm_cost.csv"):
        assert (report_dir / name).stat().st_size > 0, name
    table = pl.read_csv(report_dir / "table1.csv")
    assert set(table["method"]) == {"crel", "feldman", "dqr", "pcp"}
    assert set(table["alpha"]) == {0.1, 0.2}
    assert table["coverage_y"].is_between(0, 1).all()
    # every rule wrote its log
    assert any((finished_run / "logs/crel/nonlinear").glob("train_vae.log"))


def test_nothing_to_do_after_a_complete_run(finished_run):
    result = _snakemake(finished_run, "-n")
    assert result.returncode == 0
    assert "Nothing to be done" in result.stdout + result.stderr


def test_alpha_edit_reruns_only_alpha_dependent_jobs(finished_run):
    config_path = finished_run / "config/config.yaml"
    config = yaml.safe_load(config_path.read_text())
    config["calibration"]["alphas"] = [0.1, 0.2, 0.05]
    config_path.write_text(yaml.safe_dump(config))
    result = _snakemake(finished_run, "-n")
    assert result.returncode == 0, result.stderr
    counts = _job_counts(result.stdout)
    assert counts, result.stdout
    assert not (set(counts) & TRAINING_RULES), counts
    assert set(counts) <= ALPHA_RULES, counts
    assert counts["evaluate_crel"] == 1 and counts["evaluate_pcp"] == 1


def test_report_builds_offline(finished_run):
    result = _snakemake(finished_run, "--report", str(finished_run / "report.html"))
    assert result.returncode == 0, result.stderr[-3000:]
    html = (finished_run / "report.html").read_text(errors="ignore")
    assert "Table 1" in html

"""End to end: the tiny config runs the whole DAG; an alpha edit reruns only alpha-dependent jobs.

The synthetic track's checks read a copy of the session's run of every track (conftest ``tiny_run``)."""

import re
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml
from conftest import copy_run, dry_run_jobs, run_bounded, run_snakemake, tiny_config

REPO = Path(__file__).resolve().parents[2]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "-s", str(REPO / "workflow/Snakefile")]
TRAINING_RULES = {
    "generate_synthetic",
    "split_folds",
    "preprocess",
    "train_vae",
    "train_cvae",
    "encode_latents",
    "train_dqr",
}
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


def _snakemake(workdir, *args, budget_s=600):
    return run_bounded(SNAKEMAKE + ["-d", str(workdir), "--cores", "2", *args], budget_s)


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
def finished_run(tiny_run, tmp_path_factory):
    """A copy of the session's run of every track on the tiny config (this module edits and reruns it)."""
    return copy_run(tiny_run, tmp_path_factory.mktemp("workflow"))


def test_whole_dag_produces_every_table_and_figure(finished_run):
    report_dir = finished_run / "reports/crel/nonlinear"
    for name in (
        "table1.csv",
        "table1.md",
        "table1.png",
        "coverage_vs_alpha.png",
        "fig2_regions.png",
        "fig5_vae_vs_cvae.png",
        "reliability.csv",
        "lgm_cost.csv",
    ):
        assert (report_dir / name).stat().st_size > 0, name
    table = pl.read_csv(report_dir / "table1.csv")
    assert set(table["method"]) == {"crel", "feldman", "dqr", "pcp"}
    assert set(table["alpha"]) == {0.1, 0.2}
    assert table["coverage_y"].is_between(0, 1).all()


def test_every_job_wrote_its_log(finished_run):
    """Each job of the run names a log: file, and each such file exists and is not empty."""
    run_logs = sorted((finished_run / ".snakemake/log").glob("*.snakemake.log"))
    assert run_logs, "no Snakemake run log"
    job_logs = set(re.findall(r"^\s+log: (\S+)$", run_logs[0].read_text(), flags=re.M))
    jobs = len(re.findall(r"^(?:local)?rule (\w+):$", run_logs[0].read_text(), flags=re.M))
    assert len(job_logs) == jobs - 1, (len(job_logs), jobs)  # every job but the target rule `all`
    empty = [
        path for path in job_logs if not (finished_run / path).is_file() or (finished_run / path).stat().st_size == 0
    ]
    assert not empty, empty


def test_nothing_to_do_after_a_complete_run(finished_run):
    result = _snakemake(finished_run, "-n")
    assert result.returncode == 0
    assert "Nothing to be done" in result.stdout + result.stderr


def test_alpha_edit_reruns_only_alpha_dependent_jobs(finished_run):
    config_path = finished_run / "config/config.yaml"
    config = yaml.safe_load(config_path.read_text())
    config["crel"]["calibration"]["alphas"] = [0.1, 0.2, 0.05]
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
    assert "system-message" not in html, "a caption renders as a docutils error (see tests/workflow/test_report.py)"


ABLATION_TABLES = (
    "table4_beta",
    "table5_sd_cond",
    "table6_sd_uncond",
    "table7_vae_vs_sd",
    "table8_mae",
    "table9_pcp",
    "table10_checkpoints",
    "table12_latent_dim",
)


@pytest.fixture(scope="module")
def finished_ablations(finished_run):
    plan = _snakemake(finished_run, "-n", "ablations")
    assert plan.returncode == 0, plan.stderr[-3000:]
    result = _snakemake(finished_run, "ablations", budget_s=900)
    assert result.returncode == 0, result.stderr[-5000:]
    return finished_run, _job_counts(plan.stdout)


def test_ablations_reuse_the_main_models(finished_ablations):
    _, counts = finished_ablations
    config = yaml.safe_load((REPO / ".test/config/config.yaml").read_text())["crel"]["ablations"]
    # beta and r variants minus the configured ones (which are the main VAE), plus vae-mae
    assert counts["train_vae"] == (len(config["betas"]) - 1) + (len(config["latent_dims"]) - 1) + 1
    assert counts["train_ddpm"] == 2 and counts["train_vae_long"] == 1
    assert "train_cvae" not in counts and "generate_synthetic" not in counts


def test_every_ablation_table_lists_ours_beside_the_paper(finished_ablations):
    workdir, _ = finished_ablations
    report_dir = workdir / "reports/crel/nonlinear/ablations"
    for name in ABLATION_TABLES:
        table = pl.read_csv(report_dir / f"{name}.csv")
        assert table.height > 0 and table["coverage_y"].is_between(0, 1).all(), name
        assert (report_dir / f"{name}.md").read_text().count("|") > 10
    beta = pl.read_csv(report_dir / "table4_beta.csv")
    assert {"coverage_r_z", "coverage_z", "coverage_r_y", "coverage_y", "area", "paper_coverage_r_y"} <= set(
        beta.columns
    )
    pcp = pl.read_csv(report_dir / "table9_pcp.csv")
    assert pcp.filter(pl.col("setting") == "PCP")["runs"].item() == 2
    checkpoints = pl.read_csv(report_dir / "table10_checkpoints.csv")
    assert checkpoints["loss"].is_not_null().all()
    seeds = pl.read_csv(report_dir / "table13_seeds.csv")
    assert seeds["runs"].item() == 2 and seeds["crel_rho_std"].item() >= 0
    assert (report_dir / "fig6_num_z0.png").stat().st_size > 0
    cost = pl.read_csv(report_dir / "table11_lgm_cost.csv")
    assert cost["model"].to_list() == ["vae", "cvae", "vae_long", "ddpm_cond", "ddpm_uncond"]
    assert (cost["time_min"] > 0).all() and (cost["peak_gb"] > 0).all()
    config = yaml.safe_load((REPO / ".test/config/config.yaml").read_text())["crel"]["ablations"]
    assert cost.filter(pl.col("model") == "vae_long")["epochs"].item() == config["long_max_epochs"]


def test_ablation_alpha_edit_retrains_nothing(finished_ablations):
    workdir, _ = finished_ablations
    config_path = workdir / "config/config.yaml"
    config = yaml.safe_load(config_path.read_text())
    config["crel"]["ablations"]["mae_alphas"] = [0.1, 0.2, 0.15]
    config["crel"]["ablations"]["alpha"] = 0.2
    config_path.write_text(yaml.safe_dump(config))
    result = _snakemake(workdir, "-n", "ablations")
    assert result.returncode == 0, result.stderr[-3000:]
    counts = _job_counts(result.stdout)
    assert counts and not (set(counts) & (TRAINING_RULES | {"train_ddpm", "train_vae_long", "crel_latent_scores"})), (
        counts
    )


# ---------------------------------------------------------------- one track per config
def _single_track_config(workdir: Path, track: str) -> tuple[str, ...]:
    """A config holding one track: the tiny CReL (no image_to_text), or the tiny crc with only its COCO world and CLIP."""
    sections = {"crel": ("crel",), "crc": ("coco", "encoders", "crc")}[track]
    merged = tiny_config("i2t", "crc")
    config = {key: merged[key] for key in sections}
    if track == "crel":
        config["crel"].pop("image_to_text")
    (workdir / "config").mkdir(exist_ok=True)
    (workdir / "config/config.yaml").write_text(yaml.safe_dump(config))
    return ("config/config.yaml",)


@pytest.mark.parametrize(
    ("track", "present", "absent"),
    [
        ("crel", {"train_vae", "crel_reliability"}, {"miniworld_split", "crc_sample", "generate_captions"}),
        ("crc", {"miniworld_split", "crc_sample", "train_clip"}, {"train_vae", "generate_captions", "text_features"}),
    ],
)
def test_a_config_with_one_track_dry_runs_that_track_alone(tmp_path, track, present, absent):
    jobs = dry_run_jobs(tmp_path, "all", _single_track_config(tmp_path, track))
    assert present <= set(jobs) and not (absent & set(jobs)), jobs


def test_a_target_of_an_absent_track_names_its_config_section(tmp_path):
    configs = _single_track_config(tmp_path, "crc")
    result = run_snakemake(tmp_path, "crel", "-n", configs=configs)
    assert result.returncode != 0 and "config section 'crel'" in result.stderr + result.stdout


def test_shared_rules_name_no_track_output():
    """workflow/rules/shared/ knows no track's paths: tracks declare what they want from it."""
    shared = REPO / "workflow/rules/shared"
    named = [
        (path.name, track)
        for path in shared.glob("*.smk")
        for track in ("crel", "crc", "trust")
        if f"/{track}" in path.read_text()
    ]
    assert not named, named


@pytest.mark.parametrize(
    ("experiment", "trained", "untrained"), [("i2t", "train_bert", "train_dino"), ("t2i", "train_dino", "train_bert")]
)
def test_feature_jobs_embed_in_the_spaces_the_configured_tracks_read(tmp_path, experiment, trained, untrained):
    """One feature job per source shard writes every encoder's file, but only for the encoders a configured
    track reads: image-to-text alone trains no DINOv2 and text-to-image alone no BERT."""
    config = tiny_config("i2t", "t2i")
    config["crel"].pop({"i2t": "text_to_image", "t2i": "image_to_text"}[experiment])
    (tmp_path / "config").mkdir()
    (tmp_path / "config/config.yaml").write_text(yaml.safe_dump(config))
    jobs = dry_run_jobs(tmp_path, f"crel_{experiment}", ("config/config.yaml",))
    assert trained in jobs and untrained not in jobs, jobs
    generators = config["crel"].get("text_to_image", {}).get("models", {})
    assert jobs["image_features"] == (1 + len(generators)) * config["coco"]["shards"]  # val images + each generator's

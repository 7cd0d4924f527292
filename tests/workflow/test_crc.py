"""The CLIPScore risk-control track end to end on a miniature of the miniature (CI), and what may rerun."""

import json
import re

import polars as pl
import pytest
import yaml
from conftest import copy_run, dry_run_jobs, run_snakemake, tiny_config

pytestmark = pytest.mark.slow
SHARDS = tiny_config("i2t", "crc")["crc"]["shards"]
SAMPLING_OR_EARLIER = {
    "miniworld_split",
    "word_tokenizer",
    "train_clip",
    "crc_mini_foil_it",
    "crc_mini_foil_nocaps",
    "crc_mini_rich_hf",
    "crc_mini_judgments",
    "crc_captions",
    "crc_sample",
}


def _edited_jobs(workdir, edit) -> dict[str, int]:
    """The jobs a dry run plans after ``edit`` changes the crc section."""
    config = yaml.safe_load((workdir / "config/config.yaml").read_text())
    edit(config["crc"])
    (workdir / "config/edited.yaml").write_text(yaml.safe_dump(config))
    return dry_run_jobs(workdir, "crc", ("config/edited.yaml",))


@pytest.fixture(scope="module")
def finished(tiny_run, tmp_path_factory):
    """A copy of the session's run of every track on the tiny config (this module edits it)."""
    return copy_run(tiny_run, tmp_path_factory.mktemp("crc"))


def test_every_table_and_figure_is_written(finished):
    reports = finished / "reports/crc"
    for name in (
        "table1_tiny-clip.md",
        "table2.md",
        "table3_tiny-clip.md",
        "table4.md",
        "table5.md",
        "signal.md",
        "fig1_violins_tiny-clip.png",
        "word_examples_tiny-clip.png",
        "dropped_rows.md",
    ):
        assert (reports / name).stat().st_size > 0, name
    table2 = (reports / "table2.md").read_text()
    assert all(column in table2 for column in ("FOIL-it FDR", "in LA", "near LA", "out LA")) and "(cited)" in table2
    table1 = (reports / "table1_tiny-clip.md").read_text()
    assert table1.count("**") == 2  # exactly one α, the best calibration F1, in bold


def test_each_benchmark_counts_the_rows_its_loaders_dropped(finished):
    table = (finished / "reports/crc/dropped_rows.md").read_text()
    for name in ("foil_it", "foil_nocaps", "rich_hf", "flickr8k", "polaris"):
        dropped = json.loads((finished / f"results/crc/captions/{name}.dropped.json").read_text())
        assert dropped and all(isinstance(n, int) for reasons in dropped.values() for n in reasons.values()), name
        assert f"| {name} " in table, name


def test_the_share_of_clipped_clipscores_is_reported_per_benchmark(finished):
    assert (finished / "reports/crc/clipped.md").stat().st_size > 0
    table = pl.read_parquet(finished / "results/crc/clipped.parquet")
    names = ["foil_it", "foil_nocaps", "rich_hf", "flickr8k", "polaris"]
    assert sorted(table["benchmark"]) == sorted(names) and (table["model"] == "tiny-clip").all()
    for name in names:  # every caption of the benchmark is one sampled pair
        pairs = table.filter(pl.col("benchmark") == name)["pairs"][0]
        assert pairs == len(pl.read_parquet(finished / f"results/crc/captions/{name}.parquet")), name
    for column in ("masked_clipped", "unmasked_clipped"):
        assert table[column].is_between(0.0, 1.0).all(), table


def test_thresholds_control_the_risk_on_the_calibration_captions(finished):
    for name in ("foil_it", "rich_hf"):
        sweep = pl.read_parquet(finished / f"results/crc/tiny-clip/{name}/sweep.parquet")
        assert (sweep["calibration_risk"] <= sweep["alpha"]).all(), sweep


def test_sampling_logs_captions_without_a_maskable_word(finished):
    logs = list((finished / "logs/crc").glob("sample_tiny-clip_*_shard-*.log"))
    assert len(logs) == 5 * SHARDS  # five benchmarks
    for log in logs:
        assert re.search(r"\d+ captions have no maskable word", log.read_text()), log


def test_an_alpha_or_delta_edit_never_resamples(finished):
    jobs = _edited_jobs(finished, lambda crc: crc["words"].update(alphas=[0.2, 0.4], delta=0.2))
    assert jobs.get("crc_word_sweep") == 2 and "crc_tables" in jobs
    assert not SAMPLING_OR_EARLIER & set(jobs), jobs
    jobs = _edited_jobs(finished, lambda crc: crc["intervals"].update(delta=0.2))
    assert jobs.get("crc_intervals") == 1 and "crc_word_sweep" not in jobs
    assert not SAMPLING_OR_EARLIER & set(jobs), jobs
    jobs = _edited_jobs(
        finished, lambda crc: crc["sampling"]["words"].update(n_text=7)
    )  # a sampling edit does resample
    assert jobs.get("crc_sample") == 3 * SHARDS, jobs  # the three word benchmarks


def test_an_alpha_too_small_for_the_calibration_images_is_refused_before_any_job(finished):
    config = yaml.safe_load((finished / "config/config.yaml").read_text())
    config["crc"]["words"]["alphas"] = [0.01, 0.3]  # (0.99)^n <= 0.1 needs 230 images
    (finished / "config/edited.yaml").write_text(yaml.safe_dump(config))
    result = run_snakemake(finished, "crc", "-n", configs=("config/edited.yaml",))
    assert result.returncode != 0
    assert re.search(
        r"config key 'crc.words.alphas': \S+foil_it.parquet has \d+ calibration images.*alpha 0.01 needs 230",
        result.stderr + result.stdout,
    ), result.stdout[-2000:]


def test_the_sweeps_count_images_and_refused_captions(finished):
    sweep = pl.read_parquet(finished / "results/crc/tiny-clip/foil_it/sweep.parquet")
    captions = pl.read_parquet(finished / "results/crc/captions/foil_it.parquet").filter(
        pl.col("subset") == "calibration"
    )
    assert (sweep["unit"] == "image").all() and (sweep["n_units"] == captions["path"].n_unique()).all()
    assert sweep["n_units"][0] < len(captions)  # originals and foils share their images
    assert "captions refused" in (finished / "logs/crc/word_sweep_tiny-clip_foil_it.log").read_text()

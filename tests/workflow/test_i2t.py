"""The image-to-text track end to end on a miniature of the miniature (CI), and what may rerun."""

import json
import re

import numpy as np
import pytest
import yaml
from conftest import REPO, copy_run, dry_run_after_edit, dry_run_jobs, run_snakemake

pytestmark = pytest.mark.slow
TRAINING_OR_GENERATION = {
    "miniworld_split",
    "word_tokenizer",
    "train_clip",
    "train_bert",
    "train_captioner",
    "generate_captions",
    "image_features",
    "text_features",
    "i2t_fit",
}


CONFIGS = ("config/config.yaml",)


def _snakemake(workdir, *args, configs=CONFIGS):
    return run_snakemake(workdir, *args, configs=configs)


@pytest.fixture(scope="module")
def finished(tiny_run, tmp_path_factory):
    """A copy of the session's run of every track on the tiny config (this module reruns parts of it)."""
    workdir = copy_run(tiny_run, tmp_path_factory.mktemp("i2t"))
    result = run_snakemake(workdir, "crel_i2t_num_z0", configs=("config/config.yaml",), budget_s=300)
    assert result.returncode == 0, result.stderr[-5000:]
    return workdir


def test_every_output_of_the_track_is_written(finished):
    reports = finished / "reports/crel_i2t"
    for name in (
        "table2_alpha0.2.md",
        "fig3_violins_alpha0.2.png",
        "fig4_examples_alpha0.2.png",
        "fig6_num_z0_alpha0.2.png",
        "card_mini-blip_alpha0.2.png",
        "card_mini-git_alpha0.2.png",
    ):
        assert (reports / name).stat().st_size > 0, name
    table = (reports / "table2_alpha0.2.md").read_text()
    assert table.count("mini-blip") == 2 and table.count("mini-git") == 2  # two metrics each


def test_fig6_at_table2s_num_z0_is_table2s_number_and_the_search_is_recorded(finished):
    import polars as pl

    table = pl.read_parquet(finished / "results/crel_i2t/table2_alpha0.2.parquet")
    for row in table.iter_rows(named=True):
        folder = finished / f"results/crel_i2t/{row['model']}/{row['metric']}"
        curve, scores = (
            pl.read_parquet(folder / "num_z0_alpha0.2.parquet"),
            pl.read_parquet(folder / "scores_alpha0.2.parquet"),
        )
        at_num_z0 = curve.filter(pl.col("num_z0") == 4)["crel_rho"].item()
        assert at_num_z0 == np.mean(scores["crel_rho"].to_numpy())  # the same search: the same per-item worst cases
        assert at_num_z0 == pytest.approx(row["crel_rho"], abs=1e-12)  # Table 2's mean, up to summation order
        assert {"se", "converged"} <= set(curve.columns)
        assert row["reconstruction"] + row["worst_case"] == pytest.approx(row["delta"])
        assert 0.0 <= row["worst_nn_distance"] <= 2.0 and 0.0 <= row["reference_nn_distance"] <= 2.0
    markdown = (finished / "reports/crel_i2t/table2_alpha0.2.md").read_text()
    assert "ρ at own code" in markdown and "nearest real caption" in markdown


def test_the_grounding_report_scores_every_captioner_and_the_reference_captions_are_right(finished):
    import polars as pl

    table = pl.read_parquet(finished / "results/crel_i2t/grounding.parquet")
    assert table.select("model", "kind").rows() == [
        (model, kind) for model in ("reference", "mini-blip", "mini-git") for kind in ("colour", "shape")
    ]
    assert table.filter(pl.col("model") == "reference")["precision"].to_list() == [1.0, 1.0]  # written from the scenes
    markdown = (finished / "reports/crel_i2t/grounding.md").read_text()
    assert len(re.findall(r"^\| reference\s+\| (colour|shape)\s+\|\s+\d+\s+\| 1\.000 ", markdown, flags=re.M)) == 2, (
        markdown
    )


def test_the_temperature_ablation_samples_one_captioner_at_each_temperature(finished):
    jobs = dry_run_jobs(finished, "crel_i2t_temperature", CONFIGS)
    assert jobs["generate_captions"] == 2 * 2 and jobs["i2t_evaluate"] == 2 * 2  # 2 temperatures x 2 shards / metrics
    assert "train_captioner" not in jobs  # the sweep reuses the trained captioner
    result = _snakemake(finished, "crel_i2t_temperature")
    assert result.returncode == 0, result.stderr[-3000:]
    table = (finished / "reports/crel_i2t/temperature_alpha0.2.md").read_text()
    assert table.count("| 0.7 ") == 2 and table.count("| 1.3 ") == 2, table


@pytest.mark.parametrize(
    "section, key",
    [
        ({"condition": "reference"}, "condition"),
        ({"reliability": {"num_z0": 3, "steps": 8, "lr": 0.05}}, "num_z0_curve"),
        ({"temperature_sweep": {"model": "mini-ofa", "temperatures": [0.7, 1.3]}}, "temperature_sweep.model"),
    ],
)
def test_bad_image_to_text_options_are_refused_naming_the_key(tmp_path, section, key):
    (tmp_path / "config").mkdir()
    (tmp_path / "config/config.yaml").write_text((REPO / ".test/config/config.yaml").read_text())
    config = yaml.safe_load((REPO / ".test/config/i2t.yaml").read_text())
    config["crel"]["image_to_text"].update(section)
    (tmp_path / "config/i2t.yaml").write_text(yaml.safe_dump(config))
    result = _snakemake(tmp_path, "crel_i2t", "-n", configs=("config/config.yaml", "config/i2t.yaml"))
    assert result.returncode != 0 and key in result.stderr + result.stdout, result.stderr[-2000:]


def test_the_tiny_clip_retrieves_above_its_floor(finished):
    """A CLIP that learned nothing retrieves at chance; this one was trained for seconds on 1,900 images."""
    clip = json.loads((finished / "results/encoders/signal.json").read_text())["clip"]
    assert clip["R@5"] >= 3 * clip["chance@5"], clip


def test_feature_shards_name_the_weights_that_made_them(finished):
    from condeval.encoders.features import model_identity, read_feature_shards

    _, features, meta = read_feature_shards(
        sorted((finished / "results/features/clip/val-images").glob("shard-*.safetensors"))
    )
    assert meta["encoder"]["weights_sha256"] == model_identity(finished / "results/encoders/clip")["weights_sha256"]
    assert meta["preprocessing"]["normalisation"] == "L2"
    assert abs(float((features**2).sum(axis=1).mean()) - 1.0) < 1e-5


def test_an_alpha_edit_reruns_no_training_and_no_generation(finished):
    jobs = dry_run_after_edit(finished, "crel_i2t", ("crel", "image_to_text"), alpha=0.1)
    assert jobs["i2t_evaluate"] == 4  # 2 models x 2 metrics, recalibrated
    assert not TRAINING_OR_GENERATION & set(jobs), jobs


def test_a_shard_reruns_alone(finished):
    """Rerunning one generation shard (as after its job failed) touches no other shard, encoder or captioner."""
    shard = "results/crel_i2t/captions/mini-blip/shard-0.parquet"
    mine = ("captions/mini-blip/shard-0", "captions-mini-blip/shard-0")
    untouched = [p for p in (finished / "results").rglob("*") if p.is_file() and not any(m in str(p) for m in mine)]
    before = {p: p.stat().st_mtime_ns for p in untouched}
    shard_before = (finished / shard).stat().st_mtime_ns
    result = _snakemake(finished, shard, "--forcerun", shard)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (finished / shard).stat().st_mtime_ns > shard_before
    changed = [str(p.relative_to(finished)) for p, t in before.items() if p.stat().st_mtime_ns != t]
    assert not changed, changed
    assert "captions/mini-git/shard-0.parquet" in " ".join(
        str(p) for p in before
    )  # the other model's shards were watched

"""The text-to-image track end to end on a miniature of the miniature (CI), and what may rerun."""

import json

import numpy as np
import pytest
import yaml
from conftest import copy_run, dry_run_after_edit, run_snakemake

pytestmark = pytest.mark.slow
MODELS = ("mini-sd3", "mini-flux", "mini-kandinsky")
TRAINING_OR_GENERATION = {
    "miniworld_split",
    "word_tokenizer",
    "train_clip",
    "train_dino",
    "t2i_autoencoder",
    "t2i_t5",
    "train_t2i_generator",
    "generate_images",
    "image_features",
    "text_features",
    "t2i_fit",
}


@pytest.fixture(scope="module")
def finished(tiny_run, tmp_path_factory):
    """A copy of the session's run of every track on the tiny config, with Fig. 7 (this module reruns parts of it)."""
    workdir = copy_run(tiny_run, tmp_path_factory.mktemp("t2i"))
    result = run_snakemake(workdir, "crel_t2i_num_z0", configs=("config/config.yaml",), budget_s=300)
    assert result.returncode == 0, result.stderr[-5000:]
    return workdir


def _snakemake(workdir, *args):
    return run_snakemake(workdir, *args, configs=("config/config.yaml",))


def test_every_output_of_the_track_is_written(finished):
    reports = finished / "reports/crel_t2i"
    for name in (
        "table3_alpha0.2.md",
        "fig11_violins_alpha0.2.png",
        "fig7_num_z0_alpha0.2.png",
        "card_mini-flux_alpha0.2.png",
    ):
        assert (reports / name).stat().st_size > 0, name
    table = (reports / "table3_alpha0.2.md").read_text()
    for model in MODELS:
        assert table.count(model) == 2, model  # CLIP-SIM and DINO-SIM
    assert "DINO-SIM" in table and "CLIP-SIM" in table


def test_fig7_at_table3s_num_z0_is_table3s_number(finished):
    import polars as pl

    table = pl.read_parquet(finished / "results/crel_t2i/table3_alpha0.2.parquet")
    for row in table.iter_rows(named=True):
        folder = finished / f"results/crel_t2i/{row['model']}/{row['metric']}"
        curve = pl.read_parquet(folder / "num_z0_alpha0.2.parquet")
        starts = {"clip": 4, "dino": 8}[row["metric"]]  # .test/config/t2i.yaml num_z0
        assert curve.filter(pl.col("num_z0") == starts)["crel_rho"].item() == pytest.approx(row["crel_rho"], abs=1e-12)


def test_generated_images_are_the_items_at_the_configured_size(finished):
    from PIL import Image

    from condeval.generators.images import read_image_manifest

    ids = []
    for shard in (0, 1):
        shard_ids, paths = read_image_manifest(finished / f"results/crel_t2i/images/mini-flux/shard-{shard}.parquet")
        ids += shard_ids.tolist()
        assert Image.open(paths[0]).size == (32, 32)
    assert len(ids) == len(set(ids)) == 200


def test_the_signal_report_reads_every_generator_and_dino(finished):
    signal = json.loads((finished / "results/crel_t2i/signal.json").read_text())
    assert set(signal["models"]) == set(MODELS)
    for model in MODELS:
        for reader in ("attributes", "attributes_probe"):  # CLIP zero-shot; the probe trained on train images
            assert {"generated", "real", "shuffled", "chance"} <= set(signal["models"][model][reader])
        assert signal["models"][model]["gallery"] == 200
    assert 0.0 <= signal["dino"]["auc"] <= 1.0


def test_an_alpha_edit_reruns_no_training_and_no_generation(finished):
    jobs = dry_run_after_edit(finished, "crel_t2i", ("crel", "text_to_image"), alpha=0.1)
    assert jobs["t2i_evaluate"] == 6  # 3 models x 2 metrics, recalibrated
    assert not TRAINING_OR_GENERATION & set(jobs), jobs


def test_a_generation_shard_reruns_alone(finished):
    """Rerunning one generation shard (as after its job failed) rewrites no other model's or shard's images."""
    shard = "results/crel_t2i/images/mini-sd3/shard-0.parquet"
    watched = [p for p in (finished / "results/crel_t2i/images").rglob("*.png") if "mini-sd3/shard-0" not in str(p)]
    watched += [p for p in (finished / "results/crel_t2i/generators").rglob("*") if p.is_file()]
    before = {p: p.stat().st_mtime_ns for p in watched}
    shard_before = (finished / shard).stat().st_mtime_ns
    result = _snakemake(finished, shard, "--forcerun", shard)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (finished / shard).stat().st_mtime_ns > shard_before
    changed = [str(p.relative_to(finished)) for p, t in before.items() if p.stat().st_mtime_ns != t]
    assert not changed, changed
    assert any("mini-sd3/shard-1" in str(p) for p in before)


def test_the_same_seed_draws_the_same_images(finished, tmp_path):
    """Generation is deterministic per (seed, image id): a second run of a shard gives the same pixels."""
    from PIL import Image

    from condeval.generators.images import read_image_manifest

    shard = "results/crel_t2i/images/mini-kandinsky/shard-1.parquet"
    _, paths = read_image_manifest(finished / shard)
    first = np.stack([np.asarray(Image.open(p)) for p in paths])
    result = _snakemake(finished, shard, "--forcerun", shard)
    assert result.returncode == 0, result.stderr[-3000:]
    again = np.stack([np.asarray(Image.open(p)) for p in paths])
    np.testing.assert_array_equal(first, again)


@pytest.mark.parametrize(
    "section, key",
    [
        ({"num_z0": {"clip": 5, "dino": 8}}, "num_z0_curve"),
        (
            {
                "models": {
                    "mini-sd3": {
                        "family": "dalle",
                        "sampling": {"num_inference_steps": 2, "guidance_scale": 1.0},
                        "path": "x",
                    }
                }
            },
            "family",
        ),
        (
            {"autoencoders": {"vq": {"images": 10, "epochs": 1, "batch_size": 8, "lr": 0.1, "model": {}}}},
            "autoencoders.kl",
        ),
        ({"reliability": {"num_z0": 4, "steps": 8, "lr": 0.05}}, "reliability"),
        ({"items": 100000}, "config key 'crel.text_to_image.items' asks 100000 val images"),  # was cut to the world's
    ],
)
def test_bad_text_to_image_options_are_refused_naming_the_key(tmp_path, section, key):
    from conftest import tiny_config

    (tmp_path / "config").mkdir()
    config = tiny_config("i2t", "t2i")
    t2i = config["crel"]["text_to_image"]
    for name, value in section.items():
        t2i[name] = value if name != "models" else {**t2i["models"], **value}
    (tmp_path / "config/config.yaml").write_text(yaml.safe_dump(config))
    result = run_snakemake(tmp_path, "crel_t2i", "-n", configs=("config/config.yaml",))
    assert result.returncode != 0 and key in result.stderr + result.stdout, result.stderr[-2000:]

"""The trust-score track end to end on a miniature of the miniature (CI), and what may rerun."""

import json

import numpy as np
import polars as pl
import pytest
import yaml
from conftest import copy_run, dry_run_after_edit, dry_run_jobs, run_snakemake, tiny_config

pytestmark = pytest.mark.slow
DATASETS = ("celeba", "rxrx1")
VARIANTS = ("vanilla", "repa-siglip")
TRAINING_OR_GENERATION = {
    "trust_mini_celeba",
    "trust_mini_rxrx1",
    "trust_real_table",
    "trust_train_extractor",
    "trust_real_features",
    "trust_autoencoder",
    "trust_train_generator",
    "trust_generate",
    "trust_sample_features",
}


def test_every_output_of_the_track_is_written(tiny_run):
    table = pl.read_parquet(tiny_run / "results/trust/selection_table.parquet")
    assert {(d, v) for d, v in table.select("dataset", "variant").rows()} == {
        (d, v) for d in DATASETS for v in VARIANTS
    }
    markdown = (tiny_run / "reports/trust/selection_table.md").read_text()
    assert markdown.count("| held_out |") == 4
    for dataset, attributes in (("celeba", 4), ("rxrx1", 2)):
        signal = json.loads((tiny_run / f"results/trust/{dataset}/extractor_signal.json").read_text())
        assert set(signal) == {"dinov3", "siglip"} and all(len(s) == attributes for s in signal.values())
        assert (tiny_run / f"reports/trust/{dataset}/extractor_signal.md").is_file()
    for log in (tiny_run / "logs/trust").glob("*.log"):
        assert log.stat().st_size > 0, log


def test_cellprofiler_and_scoring_during_generation_run_in_the_tiny_dag(tiny_run):
    morphology = pl.read_parquet(tiny_run / "results/trust/rxrx1/cellprofiler/real.parquet")
    assert morphology.height > 0 and "Count_Nuclei" in morphology.columns
    report = (tiny_run / "reports/trust/rxrx1/held_out/morphology_table.md").read_text()
    assert report.startswith("| model | arm |") and "Segmentation on the miniature" in report
    assert (tiny_run / "reports/trust/rxrx1/held_out/morphology_deciles.png").stat().st_size > 0
    for dataset in DATASETS:
        steps = pl.read_parquet(tiny_run / f"results/trust/{dataset}/held_out/during_generation/vanilla.parquet")
        assert steps["path"].to_list() == ["translator", "translator", "post"]
        aligned = pl.read_parquet(tiny_run / f"results/trust/{dataset}/held_out/during_generation/repa-siglip.parquet")
        assert aligned["path"].to_list() == ["aligned", "aligned", "post"]  # REPA-SigLIP: aligned only (tiny config)
        assert aligned.filter(pl.col("scoring") == "during")["rho_trust"].is_finite().all()
        report = (tiny_run / f"reports/trust/{dataset}/held_out/during_generation.md").read_text()
        assert "Support-shift table (Appendix L.1)" in report and "| REPA aligned_mean | repa-siglip |" in report
        assert (tiny_run / f"reports/trust/{dataset}/held_out/during_generation.png").stat().st_size > 0


def test_an_analysis_edit_reruns_no_cellprofiler_and_no_generation(tiny_run, tmp_path):
    workdir = copy_run(tiny_run, tmp_path / "run")
    jobs = dry_run_after_edit(workdir, "trust", ("trust", "morphology"), bootstrap=60)
    assert set(jobs) <= {"trust_morphology", "trust_morphology_report", "trust", "total"}, jobs
    jobs = dry_run_after_edit(workdir, "trust", ("trust", "translator"), steps=[1])
    assert "trust_generate" not in jobs and "trust_cellprofiler" not in jobs, jobs
    assert jobs["trust_trajectory"] == 4 and jobs["trust_during_generation"] == 4, jobs  # 2 datasets x 2 generators


def test_samples_are_every_queried_condition_in_the_real_format(tiny_run):
    from condeval.trust.data import ATTRIBUTE_NAMES
    from condeval.trust.samples import read_samples

    for dataset, channels in (("celeba", 3), ("rxrx1", 6)):
        names = list(ATTRIBUTE_NAMES[dataset])
        conditions = pl.read_parquet(tiny_run / f"results/trust/{dataset}/conditions.parquet")
        frame, images = read_samples(
            tiny_run / f"results/trust/{dataset}/held_out/samples/vanilla/shard-0.parquet", names
        )
        assert images.shape[1:] == (channels, 16, 16)
        drawn = frame.group_by(names).len()
        assert drawn.height == conditions.height and (drawn["len"] == 12).all()
        scores = pl.read_parquet(tiny_run / f"results/trust/{dataset}/held_out/scores/vanilla.parquet")
        assert scores.height == 12 * conditions.height and np.isfinite(scores["trust"].to_numpy()).all()


def test_two_shards_draw_the_same_samples_and_scores_as_one(tiny_run, tmp_path):
    """Sharding end to end on one generator: ``sampling.shards: 2`` on a copy of the one-shard run draws,
    featurises and scores RxRx1's vanilla samples in two jobs each; every sample is the same pixels as in
    the one-shard run (seeded by condition and index alone) and scores alike."""
    from condeval.trust.data import ATTRIBUTE_NAMES
    from condeval.trust.samples import read_samples

    names = list(ATTRIBUTE_NAMES["rxrx1"])
    one_shard, one_images = read_samples(
        tiny_run / "results/trust/rxrx1/held_out/samples/vanilla/shard-0.parquet", names
    )
    workdir = copy_run(tiny_run, tmp_path / "run")
    config = yaml.safe_load((workdir / "config/config.yaml").read_text())
    config["trust"]["sampling"]["shards"] = 2
    (workdir / "config/config.yaml").write_text(yaml.safe_dump(config))
    target = "results/trust/rxrx1/held_out/selection/vanilla.json"
    result = run_snakemake(workdir, target, configs=("config/config.yaml",), budget_s=600)
    assert result.returncode == 0, result.stderr[-3000:]
    frames, images = zip(
        *(
            read_samples(workdir / f"results/trust/rxrx1/held_out/samples/vanilla/shard-{k}.parquet", names)
            for k in (0, 1)
        )
    )
    assert min(len(frame) for frame in frames) > 0
    two_shards = pl.concat(frames).with_row_index("row")
    order = two_shards.join(one_shard.with_row_index("one"), on="sample_id", how="inner").sort("one")
    assert order.height == one_shard.height == two_shards.height
    assert (order.select(names).to_numpy() == one_shard.select(names).to_numpy()).all()
    np.testing.assert_array_equal(np.concatenate(images)[order["row"].to_numpy()], one_images)
    before = pl.read_parquet(tiny_run / "results/trust/rxrx1/held_out/scores/vanilla.parquet").sort("sample_id")
    after = pl.read_parquet(workdir / "results/trust/rxrx1/held_out/scores/vanilla.parquet").sort("sample_id")
    assert after["sample_id"].to_list() == before["sample_id"].to_list()
    np.testing.assert_allclose(after["trust"].to_numpy(), before["trust"].to_numpy(), rtol=1e-5)


def test_a_selection_edit_reruns_no_training_and_no_generation(tiny_run, tmp_path):
    workdir = copy_run(tiny_run, tmp_path / "run")
    jobs = dry_run_after_edit(workdir, "trust", ("trust", "selection"), quantile=0.9)
    assert jobs["trust_selection"] == 4 and jobs["trust_selection_table"] == 1, jobs
    assert not TRAINING_OR_GENERATION & set(jobs), jobs


def test_a_scorer_edit_retrains_nothing(tiny_run, tmp_path):
    """The score is fitted in the analysis jobs alone: a new calibration share rescores every path (after
    and during generation) and trains no translator, regenerates no trajectory, runs no CellProfiler."""
    workdir = copy_run(tiny_run, tmp_path / "run")
    jobs = dry_run_after_edit(workdir, "trust", ("trust",), scorer={"calibration": 0.3})
    assert jobs["trust_selection"] == 4 and jobs["trust_during_generation"] == 4, jobs
    trained = TRAINING_OR_GENERATION | {"trust_train_translator", "trust_trajectory", "trust_cellprofiler"}
    assert not trained & set(jobs), jobs


def test_per_step_thresholds_read_real_images_at_the_steps_and_retrain_nothing(tiny_run, tmp_path):
    """Per-step thresholds (the default) come from the real support images at each scoring step; moving the
    steps reruns those and the trajectories, never a translator; post-generation thresholds need neither."""
    workdir = copy_run(tiny_run, tmp_path / "run")
    jobs = dry_run_after_edit(workdir, "trust", ("trust", "translator"), steps=[1])
    assert jobs["trust_real_trajectory"] == 4 and jobs["trust_trajectory"] == 4, jobs
    assert "trust_train_translator" not in jobs, jobs
    jobs = dry_run_after_edit(workdir, "trust", ("trust", "translator"), thresholds="post_generation")
    assert jobs["trust_during_generation"] == 4 and "trust_real_trajectory" not in jobs, jobs
    assert not (TRAINING_OR_GENERATION | {"trust_trajectory"}) & set(jobs), jobs


def test_a_regime_override_retrains_only_its_regime(tiny_run, tmp_path):
    """``generator_training.regimes``: an override for a regime the run lacks retrains nothing; one for
    held_out retrains every held-out generator (the tiny run's four)."""
    workdir = copy_run(tiny_run, tmp_path / "run")
    jobs = dry_run_after_edit(workdir, "trust", ("trust", "generator_training"), regimes={"full": {"epochs": 2}})
    assert not TRAINING_OR_GENERATION & set(jobs), jobs
    jobs = dry_run_after_edit(workdir, "trust", ("trust", "generator_training"), regimes={"held_out": {"epochs": 2}})
    assert jobs["trust_train_generator"] == 4, jobs


def test_a_dataset_override_retrains_only_its_dataset(tiny_run, tmp_path):
    """``datasets.<dataset>.generator_training``: RxRx1's epochs retrain RxRx1's two generators and leave
    CelebA's alone; an override equal to the shared value retrains nothing."""
    workdir = copy_run(tiny_run, tmp_path / "run")
    jobs = dry_run_after_edit(workdir, "trust", ("trust", "datasets", "rxrx1"), generator_training={"epochs": 2})
    assert jobs["trust_train_generator"] == 2, jobs
    jobs = dry_run_after_edit(workdir, "trust", ("trust", "datasets", "rxrx1"), generator_training={"epochs": 1})
    assert not TRAINING_OR_GENERATION & set(jobs), jobs


@pytest.mark.parametrize(
    "section, key",
    [
        ({"generators": {"vanilla": {}, "repa-clip": {"repa": {"extractor": "clip"}}}}, "extractor"),
        ({"regimes": ["partial"]}, "regimes"),
        ({"generators": {"vanilla": {"regimes": ["full"]}}}, "trust.generators.vanilla.regimes"),
        ({"datasets": {"celeba": {"root": "data/trust/celeba", "regimes": ["full"]}}}, "trust.datasets.celeba.regimes"),
        ({"datasets": {"celeba": {"miniature": {"images": 10}}}}, "root"),
        ({"sampling": {"per_condition": 0, "num_inference_steps": 2}}, "per_condition"),
        ({"extractors": {"dinov3": {"path": "x", "train": {}}, "siglip": {"path": "y"}}}, "dinov3"),
        ({"morphology": {"pipeline": "p.cppipe", "input": "rgb"}}, "input"),
        ({"morphology": {"pipeline": "nowhere.cppipe"}}, "trust.morphology.pipeline"),
        ({"translator": {"steps": [0], "noise_path": "ddpm"}}, "noise_path"),
        ({"translator": {"steps": [5], "layer": 1}}, "trust.translator.steps"),
        (
            {
                "generator_training": {
                    "epochs": 1,
                    "batch_size": 8,
                    "lr": 0.1,
                    "transformer": {"layers": 1, "heads": 1},
                    "regimes": {"full": {"steps": 10, "epochs": 2}},
                }
            },
            "trust.generator_training.regimes.full",
        ),
        (
            {
                "generator_training": {
                    "epochs": 1,
                    "batch_size": 8,
                    "lr": 0.1,
                    "transformer": {"layers": 1, "heads": 1},
                    "regimes": {"partial": {"epochs": 2}},
                }
            },
            "partial",
        ),
        ({"translator": {"steps": [0], "variants": ["sit"], "layer": 1}}, "trust.translator.variants"),
        ({"translator": {"steps": [0], "aligned": ["vanilla"], "layer": 1}}, "trust.translator.aligned"),
        ({"translator": {"steps": [0, 0]}}, "config key 'trust.translator.steps': [0, 0] has non-unique elements"),
        (
            {"translator": {"steps": [0], "layer": 1, "aligned": ["repa-siglip", "repa-siglip"]}},
            "config key 'trust.translator.aligned'",
        ),
        (
            {"translator": {"steps": [0], "layer": 3}},
            "config key 'trust.translator.layer' is block 3, past the denoiser's",
        ),
        (
            {"generators": {"vanilla": {}, "repa-siglip": {"repa": {"extractor": "siglip", "depth": 4}}}},
            "config key 'trust.generators.repa-siglip.repa.depth' is block 4",
        ),
        ({"translator": {"steps": [0], "loss": "tempered"}}, "loss"),
        ({"scorer": {"realism": "both"}}, "realism"),
        (
            {
                "generator_training": {
                    "epochs": 1,
                    "batch_size": 8,
                    "lr": 0.1,
                    "transformer": {"layers": 1, "heads": 1},
                    "validation": "test",
                }
            },
            "validation",
        ),
        (
            {
                "datasets": {
                    "rxrx1": {
                        "root": "data/trust/rxrx1",
                        "autoencoder": {"channelwise": True, "epochs": 1, "batch_size": 2, "lr": 0.1, "model": {}},
                    }
                }
            },
            "channelwise",
        ),
    ],
)
def test_bad_trust_options_are_refused_naming_the_key(tmp_path, section, key):
    (tmp_path / "config").mkdir()
    config = tiny_config("trust")
    config["trust"].update(section)
    (tmp_path / "config/config.yaml").write_text(yaml.safe_dump(config))
    result = run_snakemake(tmp_path, "trust", "-n", configs=("config/config.yaml",), budget_s=60)
    assert result.returncode != 0 and key in result.stderr + result.stdout, result.stderr[-2000:]


def test_the_channelwise_autoencoder_rule_wraps_a_configured_rgb_one(tmp_path):
    """RxRx1 as the paper config runs it: a configured RGB AutoencoderKL takes each of the six channels as
    grey; the wrapped folder replaces the six-channel autoencoder trained here (CelebA's still trains)."""
    from condeval.generators.autoencoders import tiny_autoencoder_kl
    from condeval.generators.channelwise import ChannelwiseAutoencoderKL, load_autoencoder

    tiny_autoencoder_kl(16, channels=(8, 8)).save_pretrained(tmp_path / "models/rgb-vae")
    (tmp_path / "config").mkdir()
    config = tiny_config("trust")
    config["trust"]["datasets"]["rxrx1"]["autoencoder"] = {"path": "models/rgb-vae", "channelwise": True}
    (tmp_path / "config/config.yaml").write_text(yaml.safe_dump(config))
    target = "results/trust/rxrx1/autoencoder-channelwise.sha256"
    result = run_snakemake(tmp_path, target, configs=("config/config.yaml",), budget_s=300)
    assert result.returncode == 0, result.stderr[-3000:]
    wrapper = load_autoencoder(tmp_path / "results/trust/rxrx1/autoencoder-channelwise")
    assert isinstance(wrapper, ChannelwiseAutoencoderKL) and wrapper.latent_channels == 24
    assert (tmp_path / "logs/trust/autoencoder_channelwise_rxrx1.log").read_text().count("24 latent channels") == 1
    jobs = dry_run_jobs(tmp_path, "trust", configs=("config/config.yaml",))
    assert jobs["trust_autoencoder"] == 1 and "trust_channelwise_autoencoder" not in jobs, jobs


def test_a_generator_and_a_dataset_run_only_their_regimes(tmp_path):
    """Appendix L's full-support rows for CelebA's vanilla model alone: REPA and RxRx1 stay held out."""
    (tmp_path / "config").mkdir()
    config = tiny_config("trust")
    config["trust"]["regimes"] = ["held_out", "full"]
    config["trust"]["generators"]["repa-siglip"]["regimes"] = ["held_out"]
    config["trust"]["datasets"]["rxrx1"]["regimes"] = ["held_out"]
    (tmp_path / "config/config.yaml").write_text(yaml.safe_dump(config))
    jobs = dry_run_jobs(tmp_path, "trust", configs=("config/config.yaml",))
    assert jobs["trust_train_generator"] == 3 + 2, jobs  # CelebA: vanilla x 2 regimes + REPA; RxRx1: both held out
    assert jobs["trust_selection"] == 5 and jobs["trust_fig_deciles"] == 2 + 1, jobs

"""An invalid config is refused before any job starts, and the error names the key."""

import sys
from pathlib import Path

import pytest
import yaml
from conftest import run_bounded, tiny_config

REPO = Path(__file__).resolve().parents[2]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
pytestmark = pytest.mark.slow  # each case starts Snakemake


def _write_config(workdir, mutate):
    config = yaml.safe_load((REPO / ".test/config/config.yaml").read_text())
    mutate(config)
    (workdir / "config").mkdir(exist_ok=True)
    (workdir / "config/config.yaml").write_text(yaml.safe_dump(config))


def _snakemake(workdir, *args):
    return run_bounded(
        SNAKEMAKE + ["-s", str(REPO / "workflow/Snakefile"), "-d", str(workdir), "--cores", "1", *args], budget_s=180
    )


def test_valid_test_config_dry_runs(tmp_path):
    _write_config(tmp_path, lambda c: None)
    result = _snakemake(tmp_path, "-n")
    assert result.returncode == 0, result.stderr
    assert "train_vae" in result.stdout


def _crel(key, **update):
    return lambda c: c["crel"][key].update(**update)


@pytest.mark.parametrize(
    "mutate, key",
    [
        (_crel("calibration", alphas=[0.1, 1.5]), "alphas"),
        (_crel("calibration", alphas=[0.0]), "alphas"),
        (_crel("lgm", metric="hamming"), "metric"),
        (lambda c: c["crel"]["lgm"].pop("beta"), "beta"),
        (lambda c: c["crel"]["synthetic"]["splits"].update(test=0.3), "crel.synthetic.splits"),
        (lambda c: c["crel"].update(unknown_key=1), "unknown_key"),
        (lambda c: c.update(unknown_track={}), "unknown_track"),
        (lambda c: c.update(resources={"threads": 2}), "resources"),
        (_crel("calibration", alphas=[0.001]), "crel.calibration.alphas"),
        (_crel("lgm", kind="gan"), "kind"),
        (_crel("diffusion", inference_steps=0), "inference_steps"),
        (_crel("ablations", mae_alphas=[0.1, 0.002]), "crel.ablations.mae_alphas"),
        (_crel("ablations", checkpoint_epochs=[1, 99]), "crel.ablations.checkpoint_epochs"),
        # 0.1 and 0.1000001 would both be job "alpha0.1"
        (_crel("calibration", alphas=[0.1, 0.1000001]), "crel.calibration.alphas"),
        # YAML's 2.0 passes JSON Schema's integer, NaN every range: both refused by key, one line each
        (_crel("lgm", latent_dim=2.0), "config key 'crel.lgm.latent_dim': must be an integer; got 2.0 (write 2)"),
        (_crel("synthetic", sigma=float("nan")), "config key 'crel.synthetic.sigma': NaN is not a number here"),
        (_crel("ablations", betas=[0.1, 0.1000001]), "config key 'crel.ablations.betas' holds 0.1 and 0.1000001"),
        # n = 1006 cut 50/30/10/10 cumulatively leaves 100 calibration points, too few for
        # alpha = 0.0099 (needs 101), although round(1006 * 0.1) = 101 would pass
        (
            lambda c: (c["crel"]["synthetic"].update(n=1006), c["crel"]["calibration"].update(alphas=[0.1, 0.0099])),
            "crel.calibration.alphas",
        ),
        # 300 val images leave 15 calibration images, too few for alpha = 0.05 (needs 19)
        (
            lambda c: (c.update(tiny_config("i2t")), c["crel"]["image_to_text"].update(alpha=0.05)),
            "config key 'crel.image_to_text.alpha' holds 0.05, but the calibration fold has only 15 points",
        ),
        # 200 text-to-image items leave 10 calibration items, too few for alpha = 0.04 (needs 24)
        (
            lambda c: (c.update(tiny_config("i2t", "t2i")), c["crel"]["text_to_image"].update(alpha=0.04)),
            "config key 'crel.text_to_image.alpha' holds 0.04, but the calibration fold has only 10 points",
        ),
        # an encoder's misspelt model keyword would reach ClipSizes as a raw TypeError in its job
        (
            lambda c: (c.update(tiny_config("i2t")), c["encoders"]["clip"]["train"]["model"].update(vision_widht=64)),
            "config key 'encoders.clip.train.model' names ['vision_widht'], which ClipSizes does not take",
        ),
        # a misspelt model keyword reached tiny_autoencoder_kl as a raw TypeError in the job
        (
            lambda c: (c.update(tiny_config("trust")), c["trust"]["autoencoder"]["model"].update(latent_chanels=4)),
            "config key 'trust.autoencoder.model' names ['latent_chanels'], which tiny_autoencoder_kl does not take",
        ),
    ],
)
def test_invalid_config_is_refused_before_any_job(tmp_path, mutate, key):
    """A real run (not a dry run): it must stop at parse time, before writing anything."""
    _write_config(tmp_path, mutate)
    result = _snakemake(tmp_path)
    assert result.returncode != 0
    assert key in result.stderr + result.stdout
    assert "Failed validating" not in result.stderr + result.stdout  # one line per key, not jsonschema's dump
    for generated in ("data", "results", "logs"):
        assert not (tmp_path / generated).exists(), generated


def test_a_key_written_twice_is_refused_before_any_job(tmp_path):
    """PyYAML keeps the last of two `alphas:` silently: a lab merging two blocks would lose one."""
    config = (REPO / ".test/config/config.yaml").read_text()
    (tmp_path / "config").mkdir()
    (tmp_path / "config/config.yaml").write_text(config + "\ncrel:\n  seed: 3\n")
    result = _snakemake(tmp_path)
    assert result.returncode != 0
    assert "config/config.yaml: line " in result.stderr and "key 'crel' is written twice" in result.stderr
    assert not (tmp_path / "results").exists()


def test_opt_in_targets_without_their_section_name_it(tmp_path):
    _write_config(tmp_path, lambda c: None)
    for target, section in (("crel_i2t_num_z0", "crel.image_to_text"), ("crel_t2i_num_z0", "crel.text_to_image")):
        result = _snakemake(tmp_path, "-n", target)
        assert result.returncode != 0
        assert f"target '{target}' needs the config section '{section}'" in result.stderr + result.stdout


def _with_i2t(mutate):
    """The tiny config plus the image-to-text sections (.test/config/i2t.yaml), then ``mutate``."""

    def apply(config):
        extra = yaml.safe_load((REPO / ".test/config/i2t.yaml").read_text())
        config["crel"].update(extra.pop("crel"))
        config.update(extra)
        mutate(config)

    return apply


def _models(c):
    return c["crel"]["image_to_text"]["models"]


@pytest.mark.parametrize(
    "mutate, key",
    [
        (lambda c: c["coco"].update(source="lmdb"), "source"),
        (lambda c: c["encoders"]["clip"].update(path="models/clip"), "clip"),  # both path and train
        (lambda c: _models(c)["mini-blip"]["train"].update(architecture="ofa"), "architecture"),
        (lambda c: _models(c)["mini-git"].update(unknown=1), "unknown"),
        (lambda c: c["crel"]["image_to_text"]["vae"].update(dropout=1.5), "dropout"),
        (lambda c: c.pop("coco"), "coco"),
    ],
)
def test_invalid_image_to_text_config_is_refused_before_any_job(tmp_path, mutate, key):
    _write_config(tmp_path, _with_i2t(mutate))
    result = _snakemake(tmp_path, "crel_i2t")
    assert result.returncode != 0
    assert key in result.stderr + result.stdout
    for generated in ("data", "results", "logs"):
        assert not (tmp_path / generated).exists(), generated


def _with_crc(mutate):
    """The tiny config with .test/config/i2t.yaml and crc.yaml merged in, then ``mutate``."""

    def apply(config):
        config.clear()
        config.update(tiny_config("i2t", "crc"))
        mutate(config)

    return apply


def _crc(*keys, **update):
    def mutate(config):
        section = config["crc"]
        for key in keys:
            section = section[key]
        section.update(**update)

    return mutate


@pytest.mark.parametrize(
    "mutate, key",
    [
        (_crc("intervals", "calibration", dataset="vicr"), "crc.intervals.calibration.dataset"),
        (
            _crc("data", "judgments", flickr8k={"format": "pickle", "file": "data/vicr.pkl", "images": "data"}),
            "crc.allow_pickle",
        ),
        (_crc("words", alphas=[0.2, 1.2]), "alphas"),
        (_crc("words", alphas=[0.1, 0.1000001]), "config key 'crc.words.alphas' holds 0.1 and 0.1000001"),
        (_crc("words", delta=float("nan")), "config key 'crc.words.delta': NaN is not a number here"),
        (lambda c: c["coco"].update(shards=2.0), "config key 'coco.shards': must be an integer"),
        (_crc("sampling", "words", text_ratio=1.0), "text_ratio"),
        (_crc(clipscore_weight="cosine"), "clipscore_weight"),
        (_crc("tagger", kind="stanza"), "model_dir"),
        (lambda c: c["coco"]["miniworld"].update(novel_shapes=["hexagon"]), "coco.miniworld.novel_shapes"),
        (lambda c: c["coco"]["miniworld"].pop("novel_shapes"), "crc.miniature"),
    ],
)
def test_invalid_crc_config_is_refused_before_any_job(tmp_path, mutate, key):
    _write_config(tmp_path, _with_crc(mutate))
    result = _snakemake(tmp_path, "crc")
    assert result.returncode != 0
    assert key in result.stderr + result.stdout, result.stderr[-2000:]
    for generated in ("data", "results", "logs"):
        assert not (tmp_path / generated).exists(), generated


def test_a_missing_cellprofiler_is_refused_before_any_job(tmp_path):
    """A run that would start CellProfiler jobs in its own environment names the configured program when it
    is not there, before the first job (it passed the dry run and failed hours in, at the first shard)."""
    config = tiny_config("trust")
    config["trust"]["morphology"]["cellprofiler"] = "missing/bin/cellprofiler"
    (tmp_path / "config").mkdir()
    (tmp_path / "config/config.yaml").write_text(yaml.safe_dump(config))
    result = _snakemake(tmp_path)
    log = result.stderr + result.stdout
    assert (
        result.returncode != 0 and "config key 'trust.morphology.cellprofiler' names 'missing/bin/cellprofiler'" in log
    ), log[-2000:]
    for generated in ("data", "results"):
        assert not (tmp_path / generated).exists(), generated

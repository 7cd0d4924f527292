"""The trust track's DAG design (condeval.trust.design): which generators a run trains, what each job
reads and the config checks before any job, on the shipped configs and edits of them."""

import copy
from pathlib import Path

import pytest
import yaml

from condeval.trust import design

REPO = Path(__file__).resolve().parents[2]


def _trust(name):
    return copy.deepcopy(yaml.safe_load((REPO / "config" / name).read_text())["trust"])


@pytest.fixture
def offline():
    return _trust("config.yaml")


@pytest.fixture
def paper():
    return _trust("paper.yaml")


def test_shipped_configs_pass(offline, paper):
    design.check_config(offline)
    design.check_config(paper)


def test_variants_follow_both_regime_lists(offline):
    assert design.variants(offline, "celeba", "held_out") == ["vanilla", "repa-dinov3", "repa-siglip"]
    assert design.variants(offline, "celeba", "full") == ["vanilla"]  # the REPA generators name held_out only
    assert design.variants(offline, "rxrx1", "full") == []  # RxRx1 names held_out only
    runs = design.runs(offline)
    assert {"dataset": "rxrx1", "regime": "held_out", "variant": "repa-siglip"} in runs
    assert len(runs) == 3 + 1 + 3


@pytest.mark.parametrize(
    "edit, key",
    [
        (lambda t: t["generators"]["vanilla"].update(regimes=["shifted"]), "trust.generators.vanilla.regimes"),
        (lambda t: t["datasets"]["celeba"].update(regimes=["shifted"]), "trust.datasets.celeba.regimes"),
        (lambda t: t["generators"]["repa-dinov3"]["repa"].update(depth=3), "trust.generators.repa-dinov3.repa.depth"),
        (lambda t: t["translator"].update(layer=3), "trust.translator.layer"),
        (lambda t: t.pop("autoencoder"), "trust.autoencoder"),
        (lambda t: t["extractors"]["dinov3"]["train"]["model"].update(widht=8), "trust.extractors.dinov3.train.model"),
        (lambda t: t["clip"]["train"]["model"].update(image_size=8), "trust.clip.train.model"),
        (
            lambda t: t["datasets"]["rxrx1"]["autoencoder"]["model"].update(chanels=[8]),
            "trust.datasets.rxrx1.autoencoder",
        ),
    ],
    ids=[
        "generator-regime",
        "dataset-regime",
        "repa-block",
        "translator-block",
        "no-autoencoder",
        "extractor-key",
        "clip-fixed-key",
        "autoencoder-key",
    ],
)
def test_bad_config_is_refused_naming_its_key(offline, edit, key):
    edit(offline)
    with pytest.raises(ValueError, match=f"config key '{key}"):
        design.check_config(offline)


def test_blocks_are_checked_against_the_paper_denoiser(paper):
    paper["translator"]["layer"] = 13
    with pytest.raises(ValueError, match="past the denoiser's .* \\(12\\)"):
        design.check_config(paper)


def test_generator_training_overrides_in_order(offline, paper):
    rxrx1 = design.generator_training(offline, "vanilla", "held_out", "rxrx1")
    assert rxrx1["epochs"] == 50 and rxrx1["batch_size"] == 32  # the dataset's length, the shared rest
    assert design.generator_training(offline, "vanilla", "held_out", "celeba")["epochs"] == 20
    # a length in the other unit replaces the inherited one rather than sitting beside it
    paper["datasets"]["rxrx1"]["generator_training"] = {"epochs": 3}
    trained = design.generator_training(paper, "vanilla", "full", "rxrx1")
    assert trained["epochs"] == 3 and "steps" not in trained
    paper["generator_training"]["regimes"] = {"full": {"steps": 7}}
    trained = design.generator_training(paper, "vanilla", "full", "rxrx1")
    assert trained["steps"] == 7 and "epochs" not in trained and "regimes" not in trained


def test_scoring_spaces(paper, offline):
    assert design.scoring_extractor(paper, "vanilla") == "dinov3"
    assert design.scoring_extractor(paper, "repa-siglip") == "siglip"
    assert design.sample_extractors(paper, "celeba", "repa-siglip") == [
        "clip",
        "dinov3",
        "siglip",
    ]  # CelebA has prompts
    assert design.sample_extractors(paper, "rxrx1", "vanilla") == ["dinov3"]
    del offline["clip"]
    assert design.clip_datasets(offline) == []


def test_inputs_resolve_to_folders_or_manifests(paper, offline):
    assert design.autoencoder_input(paper, "celeba") == "models/stabilityai/sd-vae-ft-mse"
    assert design.autoencoder_input(paper, "rxrx1") == "results/trust/rxrx1/autoencoder-channelwise.sha256"
    assert design.autoencoder_input(offline, "celeba") == "results/trust/celeba/autoencoder.sha256"
    assert design.extractor_input(offline, "rxrx1", "siglip") == "results/trust/rxrx1/extractors/siglip.sha256"
    assert design.release_path(offline, "rxrx1").endswith("/metadata.csv")  # the miniature's rule writes it last
    assert design.release_path(paper, "rxrx1") == paper["datasets"]["rxrx1"]["root"]


def test_sample_counts(paper):
    assert design.queried_conditions(paper, "rxrx1") == 50  # 25 seen + 25 unseen pairs
    assert design.queried_conditions(paper, "celeba") == 2**4  # every tuple of four binary attributes
    assert design.samples_per_shard(paper, "celeba") == -(-16 * 1000 // paper["sampling"]["shards"])


def test_targets(offline, paper):
    targets = design.targets(offline)
    assert "reports/trust/selection_table.md" in targets
    assert "reports/trust/celeba/held_out/graded_shift.png" in targets
    assert "reports/trust/celeba/full/graded_shift.png" not in targets  # Fig. 7 needs a distance to the support
    assert "reports/trust/rxrx1/held_out/morphology_table.md" in targets
    assert "reports/trust/celeba/full/during_generation.md" in targets  # vanilla is a translator variant
    del offline["morphology"], offline["translator"]
    fewer = design.targets(offline)
    assert not any("morphology" in t or "during_generation" in t for t in fewer)
    del paper["generators"]
    assert all("extractor_signal" in t for t in design.targets(paper))

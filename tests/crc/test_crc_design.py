"""The CLIPScore track's design: the config checks its DAG relies on and what each job reads."""

import copy
import math
from pathlib import Path

import pytest
import yaml

from condeval.crc import design

REPO = Path(__file__).resolve().parents[2]


def _sections(name):
    config = yaml.safe_load((REPO / "config" / name).read_text())
    return config["crc"], config["coco"]


@pytest.fixture
def offline():
    return copy.deepcopy(_sections("config.yaml"))


@pytest.fixture
def paper():
    crc, coco = copy.deepcopy(_sections("paper.yaml"))
    crc["allow_pickle"] = True  # config/allow_pickles.yaml's opt-in
    return crc, coco


def _check(crc, coco, novel_shapes=("star",)):
    design.check_config(crc, coco, has_encoders=True, novel_shapes=list(novel_shapes))


def test_shipped_configs_pass(offline, paper):
    _check(*offline)
    _check(*paper)


def _refused(crc, coco, key, **kwargs):
    with pytest.raises(ValueError, match=f"config key '{key}") as refusal:
        _check(crc, coco, **kwargs)
    return str(refusal.value)


def test_paper_pickles_need_the_opt_in():
    crc, coco = _sections("paper.yaml")
    message = _refused(crc, coco, "crc.data.judgments'")
    assert "['vicr', 'composite']" in message and "allow_pickles.yaml" in message


def test_judgment_set_named_like_a_word_benchmark_is_refused(offline):
    crc, coco = offline
    crc["data"]["judgments"]["rich_hf"] = crc["data"]["judgments"].pop("flickr8k")
    assert "['rich_hf']" in _refused(crc, coco, "crc.data.judgments'")


def test_interval_calibration_set_must_be_a_judgment_set(offline):
    crc, coco = offline
    crc["intervals"]["calibration"]["dataset"] = "vicr"
    assert "'vicr'" in _refused(crc, coco, "crc.intervals.calibration.dataset")


def test_calibration_pickle_needs_its_calibration_subset(paper):
    crc, coco = paper
    crc["data"]["judgments"]["vicr"]["subsets"] = {"test": "test"}
    _refused(crc, coco, "crc.data.judgments.vicr.subsets")


def test_lexicon_tagger_only_on_the_mini_world(paper):
    crc, coco = paper
    crc["tagger"] = {"kind": "lexicon"}
    _refused(crc, coco, "crc.tagger.kind")


def test_calibrating_on_train_needs_the_train_file(paper):
    crc, coco = paper
    del crc["data"]["foil_it"]["train"]
    _refused(crc, coco, "crc.data.foil_it.train")


def test_clip_encoder_needs_the_encoders_section(offline):
    crc, coco = offline
    with pytest.raises(ValueError, match="'crc.models.tiny-clip.encoder' needs the 'encoders' section"):
        design.check_config(crc, coco, has_encoders=False, novel_shapes=["star"])


@pytest.mark.parametrize(
    "edit, key",
    [
        (lambda crc, coco: coco.update(source="files") or crc.update(tagger={"kind": "stanza"}), "crc.miniature"),
        (lambda crc, coco: crc["data"]["judgments"].pop("flickr8k"), "crc.data.judgments'"),
        (lambda crc, coco: crc["data"]["judgments"]["polaris"].update(file="x/p.csv"), "crc.data.judgments.polaris'"),
        (lambda crc, coco: crc["data"]["foil_it"].update(train="elsewhere.json"), "crc.data.foil_it.train"),
        (lambda crc, coco: crc["data"]["rich_hf"].update(images="img"), "crc.data.rich_hf.images"),
        (lambda crc, coco: crc["data"]["foil_nocaps"].update(images="data"), "crc.data.foil_nocaps.images"),
    ],
    ids=["real-coco", "judgment-missing", "judgment-file", "foil-train", "rich-hf-images", "nocaps-images"],
)
def test_miniature_paths_are_where_it_writes(offline, edit, key):
    crc, coco = offline
    edit(crc, coco)
    _refused(crc, coco, key)


def test_miniature_needs_novel_shapes(offline):
    _refused(*offline, "crc.miniature", novel_shapes=())


def test_benchmarks_and_targets(paper):
    crc, _ = paper
    assert design.benchmarks(crc) == ["foil_it", "foil_nocaps", "rich_hf", "vicr", "polaris", "flickr8k", "composite"]
    targets = design.targets(crc)
    assert targets[:2] == ["reports/crc/table2.md", "reports/crc/clipped.md"]
    assert {f"reports/crc/fig1_violins_{m}.png" for m in crc["models"]} <= set(targets)
    assert {f"reports/crc/word_examples_{m}.png" for m in crc["models"]} <= set(targets)


def test_foil_it_sweep_reads_foil_nocaps_as_its_shift(paper):
    crc, _ = paper
    foil_it = design.sweep_inputs(crc, "ml-laion-b32", "foil_it")
    assert foil_it["shift_captions"] == "results/crc/captions/foil_nocaps.parquet"
    assert len(foil_it["samples"]) == len(foil_it["shift_samples"]) == crc["shards"]
    assert set(design.sweep_inputs(crc, "ml-laion-b32", "rich_hf")) == {"captions", "samples"}
    assert len(design.sweep_samples(crc, "ml-laion-b32")) == len(design.SWEEPS) * crc["shards"]


def test_interval_inputs_cover_every_judgment_set(paper):
    crc, _ = paper
    inputs = design.interval_inputs(crc, "ml-laion-h14")
    assert [Path(p).stem for p in inputs["captions"]] == list(crc["data"]["judgments"])
    assert len(inputs["samples"]) == len(crc["data"]["judgments"]) * crc["shards"]


def test_only_the_calibration_set_is_split(paper):
    crc, _ = paper
    assert design.caption_params(crc, "vicr")["calibration_fraction"] == 0.2
    assert design.caption_params(crc, "polaris")["calibration_fraction"] == 0.0
    assert design.caption_params(crc, "foil_it")["train_images"] == "data/coco2014/train2014"
    assert design.caption_params(crc, "rich_hf") == {"images": "data/richhf18k/images"}


def test_real_data_image_folders_are_inputs_unless_a_release_file_holds_them(paper):
    crc, _ = paper
    foil_it = design.caption_inputs(crc, "foil_it", "unused")
    assert foil_it["image_folders"] == ["data/coco2014/train2014", "data/coco2014/val2014"]
    assert design.caption_inputs(crc, "vicr", "unused")["image_folders"] == []  # Vicr/ comes with VICR.pkl
    assert design.caption_inputs(crc, "foil_nocaps", "unused")["image_folders"] == ["data/nocaps"]


def test_miniature_foil_it_images_come_with_the_world(offline):
    crc, _ = offline
    inputs = design.caption_inputs(crc, "foil_it", "data/coco/annotations/captions_val2014.json")
    assert inputs["images"] == "data/coco/annotations/captions_val2014.json"
    assert "image_folders" not in inputs


def test_sampling_shards_split_the_release(paper):
    crc, _ = paper
    from condeval.crc.benchmarks import PAPER_PAIRS

    per_shard = design.sampling_pairs(crc, "foil_it")
    sampled_train = math.ceil(crc["words"]["calibration_fraction"] * PAPER_PAIRS["foil_it_train"])  # 10%: 39,530
    assert per_shard == -(-(PAPER_PAIRS["foil_it"] + sampled_train) // crc["shards"])
    assert design.sampling_pairs(crc, "someone_elses_set") == -(-max(PAPER_PAIRS.values()) // crc["shards"])
    assert design.sampling_params(crc, "vicr")["image_ratio"] == 0.3
    assert design.sampling_params(crc, "rich_hf")["image_ratio"] == 0.05


def test_models_and_taggers(paper, offline):
    crc, _ = paper
    assert design.paper_models(crc) == {"ml-laion-b32": "B", "ml-laion-h14": "H"}
    assert design.model_loading(crc, "ml-laion-b32")["trust_remote_code"] is True
    assert design.tagger_inputs(crc, "data/coco2014") == ["models/stanza_resources"]
    assert design.tagger_inputs(offline[0], "data/coco")[0] == "data/coco/annotations/tokens_train2014.jsonl"
    assert design.keeps_distribution(crc, "vicr") and not design.keeps_distribution(crc, "foil_it")

"""The rehearsal's raw data: every source of the paper config in place, fetched by the workflow's own fetch
code, and read by the project's own loaders at the releases' sizes."""

import dataclasses
import hashlib
import io
import json
import re
import zipfile
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from PIL import Image

from condeval.core import fetch
from condeval.core.conformal import conformal_quantile
from condeval.crc import benchmarks
from condeval.crc.evaluate import calibration_units
from condeval.crc.word_risk import check_alphas, min_calibration_units
from condeval.crel.image_to_text import assign_folds
from condeval.datasets import celeba, coco, rich_hf, rxrx1
from condeval.rehearsal import data
from condeval.rehearsal.run import CONFIGS, REPOSITORY, merged_config
from condeval.trust import data as trust_data
from condeval.trust.evaluate import ScorerOptions, fit_and_score

CONFIG = merged_config(REPOSITORY / path for path in CONFIGS)
ELSEWHERE = {"stanza_en"}  # stanza's models are condeval.rehearsal.stanza_models' to write
ANNOTATIONS_ZIP = "http://images.cocodataset.org/annotations/annotations_trainval2014.zip"
#: What the real archives hold beside the members the catalogue extracts.
OTHER_MEMBERS = {"instances_train2014.json", "instances_val2014.json"}
RICH_HF_FEATURES = {
    "filename",
    "aesthetics_score",
    "artifact_score",
    "misalignment_score",
    "overall_score",
    "artifact_map",
    "misalignment_map",
    "prompt_misalignment_label",
}


def catalogue_sources() -> list[fetch.Source]:
    return fetch.resolve_sources(fetch.read_catalog(REPOSITORY / CONFIG["fetch"]["sources"]), CONFIG)


def http_items() -> list[dict]:
    return [item for source in catalogue_sources() if source.kind == "http" for item in source.spec["http"]]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def every_file(root: Path) -> dict[str, str]:
    return {str(path.relative_to(root)): sha256(path) for path in sorted(root.rglob("*")) if path.is_file()}


def under(work: Path, key: str) -> Path:
    return work / fetch.config_value(CONFIG, key, "test")


def image_size(path) -> tuple[str, str, tuple[int, int]]:
    with Image.open(path) as image:
        return image.format, image.mode, image.size


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """The paper config's data written once for seed 0: (root, {url: served file})."""
    root = tmp_path_factory.mktemp("rehearsal")
    return root, data.write_rehearsal_data(CONFIG, root / "work", root / "serve", seed=0)


@pytest.fixture(scope="module")
def work(written):
    """The working folder once the catalogue's HTTP sources are fetched from the served folder (a file://
    mirror) by :func:`condeval.core.fetch.fetch_source`, pinned to the served files' sha256 and size."""
    root, served = written
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root / "work")  # the catalogue's paths are the config's, relative to the working folder
        for source in catalogue_sources():
            if source.kind == "http":
                pins = [
                    item | {"sha256": sha256(served[item["url"]]), "size": served[item["url"]].stat().st_size}
                    for item in source.spec["http"]
                ]
                pinned = dataclasses.replace(source, spec=source.spec | {"http": pins})
                fetch.fetch_source(pinned, mirror=(root / "serve").as_uri(), log=lambda message: None)
    return root / "work"


# ------------------------------------------------------------------------------------------ counts
@pytest.mark.parametrize("alpha", [0.1, 0.2, 0.5])
def test_fold_items_are_the_fewest_that_calibrate(alpha):
    def calibrate(n):
        folds = assign_folds(np.arange(n), seed=0)
        conformal_quantile(np.arange((folds == "cal").sum(), dtype=float), alpha)

    calibrate(data.fold_items(alpha))
    with pytest.raises(ValueError):
        calibrate(data.fold_items(alpha) - 1)


def test_image_counts_follow_the_config():
    counts = data.coco_image_counts(CONFIG)
    crel, words = CONFIG["crel"], CONFIG["crc"]["words"]
    # every val image is an image-to-text item; text-to-image draws its items from them
    assert counts["val"] == max(data.fold_items(crel["image_to_text"]["alpha"]), crel["text_to_image"]["items"])
    assert counts["train"] >= max(min_calibration_units(alpha, words["delta"]) for alpha in words["alphas"])
    stricter = CONFIG | {"crel": crel | {"image_to_text": crel["image_to_text"] | {"alpha": 0.1}}}
    assert data.coco_image_counts(stricter)["val"] == 180  # the calibration fold's 9 points at 0.1


# ---------------------------------------------------------------------------------------- placement
@pytest.mark.slow
def test_every_source_is_in_place(written):
    root, served = written
    for source in catalogue_sources():
        if source.kind != "manual" or source.name in ELSEWHERE:
            continue
        for path in source.files:
            assert (root / "work" / path).is_file(), f"{source.name}: {path} was not written"
        for path in set(source.checked or source.outputs) - set(source.files):
            assert any((root / "work" / path).iterdir()), f"{source.name}: {path}/ is empty"
    assert set(served) == {item["url"] for item in http_items()}
    for url, path in served.items():
        assert path == root / "serve" / url.split("://", 1)[1] and path.is_file()


@pytest.mark.slow
def test_served_archives_hold_the_catalogue_members(written):
    """Each archive holds what its ``extract`` takes (a folder: exactly the images its captions file lists)
    and beside it only what the real archive also has."""
    _, served = written
    with zipfile.ZipFile(served[ANNOTATIONS_ZIP]) as notes:
        documents = {
            split: json.loads(notes.read(f"annotations/captions_{split}2014.json")) for split in ("train", "val")
        }
    listed = {
        f"{split}2014/": {f"{split}2014/{image['file_name']}" for image in document["images"]}
        for split, document in documents.items()
    }
    for item in http_items():
        if "extract" not in item:
            continue
        with zipfile.ZipFile(served[item["url"]]) as archive:
            names = {name for name in archive.namelist() if not name.endswith("/")}
        taken = set()
        for member in item["extract"]:
            inside = {name for name in names if name.startswith(member)} if member.endswith("/") else {member}
            assert inside == listed.get(member, inside) and inside <= names, f"{item['url']}: {member}"
            taken |= inside
        assert {Path(name).name for name in names - taken} <= OTHER_MEMBERS, item["url"]


@pytest.mark.slow
def test_fetch_rules_bring_every_download_in(work):
    for source in catalogue_sources():
        if source.kind == "http":
            assert all((work / path).exists() for path in source.outputs), source.name


# ------------------------------------------------------------------------------------------ formats
@pytest.mark.slow
def test_coco_loads_at_coco_sizes(work):
    for split, n in data.coco_image_counts(CONFIG).items():
        captions_json = under(work, "coco.root") / "annotations" / f"captions_{split}2014.json"
        captions = coco.load_captions(captions_json, coco.image_dir(captions_json))
        assert coco.evaluation_pairs(captions).height == n and captions.height == 5 * n
        records = {image["id"]: image for image in json.loads(captions_json.read_text())["images"]}
        assert {tuple(record) for record in records.values()} == {
            ("license", "file_name", "coco_url", "height", "width", "date_captured", "flickr_url", "id")
        }
        for image_id, path in coco.evaluation_pairs(captions).select("image_id", "path").iter_rows():
            kind, mode, (width, height) = image_size(path)
            assert (kind, mode, width, height) == (
                "JPEG",
                "RGB",
                records[image_id]["width"],
                records[image_id]["height"],
            )
            assert width != height and 375 <= min(width, height) and max(width, height) <= 640


@pytest.mark.slow
def test_foil_benchmarks_load_and_calibrate(work):
    section, words = CONFIG["crc"]["data"]["foil_it"], CONFIG["crc"]["words"]
    foil_it = benchmarks.foil_it_captions(
        under(work, "crc.data.foil_it.file"),
        work / section["images"],
        calibration_fraction=words["calibration_fraction"],
        seed=CONFIG["crc"]["seed"],
        train_json=under(work, "crc.data.foil_it.train"),
        train_image_dir=work / section["train_images"],
    )
    assert foil_it.filter(pl.col("subset") == "test")["path"].n_unique() == data.foil_it_images(CONFIG)["test"]
    check_alphas(words["alphas"], words["delta"], calibration_units(foil_it, "image"), "image", "FOIL-it")
    folders = foil_it.group_by("subset").agg(pl.col("path").str.extract(r"/(\w+2014)/[^/]+$").unique()).sort("subset")
    assert folders.rows() == [("calibration", ["train2014"]), ("test", ["val2014"])]
    errors = foil_it["labels"].list.sum()  # an original has no wrong word, its foil one
    assert set(errors.to_list()) == {0, 1} and errors.sum() == foil_it.height // 2
    nocaps = benchmarks.foil_nocaps_captions(
        under(work, "crc.data.foil_nocaps.file"), under(work, "crc.data.foil_nocaps.images")
    )
    assert dict(nocaps.group_by("domain").len().rows()) == {domain: 2 * n for domain, n in data.NOCAPS_RECORDS.items()}
    for path in nocaps["path"].unique():
        kind, _, size = image_size(path)
        assert kind == "JPEG" and max(size) == 1024 and min(size) >= 680


@pytest.mark.slow
def test_rich_hf_loads_with_the_release_features(work):
    files = {key: under(work, f"crc.data.rich_hf.{key}") for key in ("calibration", "test", "prompts", "images")}
    table = benchmarks.rich_hf_captions(files["calibration"], files["test"], files["prompts"], files["images"])
    assert dict(table.group_by("subset").len().rows()) == {"calibration": 12, "test": 12}
    words = CONFIG["crc"]["words"]
    check_alphas(words["alphas"], words["delta"], calibration_units(table, "image"), "image", "RichHF-18K")
    assert pl.read_parquet(files["prompts"]).columns == ["caption", "image_0_uid", "image_1_uid"]
    for tfrecord in (files["calibration"], files["test"]):
        for _, features in rich_hf._examples(tfrecord):
            assert set(features) == RICH_HF_FEATURES
            for heatmap in ("artifact_map", "misalignment_map"):
                assert image_size(io.BytesIO(features[heatmap].bytes_list.value[0])) == ("PNG", "L", (512, 512))
    for path in table["path"]:
        _, mode, (width, height) = image_size(path)
        assert mode == "RGB" and width == height >= 512


@pytest.mark.slow
def test_judgment_sets_load_and_calibrate(work):
    calibration = CONFIG["crc"]["intervals"]["calibration"]
    for name, section in CONFIG["crc"]["data"]["judgments"].items():
        fraction = calibration["fraction"] if name == calibration["dataset"] else 0.0
        table = benchmarks.judged_captions(
            section["format"],
            work / section["file"],
            work / section["images"],
            allow_pickle=True,
            calibration_fraction=fraction,
            seed=0,
            subsets=section.get("subsets"),
        )
        assert table.height == 3 * data.JUDGMENT_IMAGES[name] and table["human_score"].n_unique() > 2, name
        assert (table["subset"] == "calibration").sum() >= (3 if fraction else 0)  # a correlation needs three pairs
        for path in table["path"].unique():
            kind, _, size = image_size(path)
            assert kind == "JPEG" and 333 <= min(size) and max(size) <= 640, (name, size)


@pytest.mark.slow
def test_celeba_loads_every_condition_in_every_partition(work):
    root = under(work, "trust.datasets.celeba.root")
    frame = celeba.load_celeba(root)
    counts = frame.group_by("partition", *celeba.ATTRIBUTES).len()
    assert counts.height == 3 * 16
    for statistic in (pl.col("len").min(), pl.col("len").max()):
        assert dict(counts.group_by("partition").agg(statistic).rows()) == data.CELEBA_PER_CONDITION
    assert frame["partition"].to_list() == sorted(frame["partition"], key=["train", "val", "test"].index)
    lines = (root / "list_attr_celeba.txt").read_text().splitlines()
    assert lines[0] == str(frame.height) and lines[1].split() == list(celeba.CELEBA_ATTRIBUTES)
    assert all(re.fullmatch(r"\d{6}\.jpg( +-?1){40}", line) for line in lines[2:])
    assert {image_size(path) for path in frame["path"]} == {("JPEG", "RGB", (178, 218))}


@pytest.mark.slow
def test_rxrx1_sites_are_six_512_pixel_channels(work):
    root = under(work, "trust.datasets.rxrx1.root")
    metadata = rxrx1.read_metadata(root)
    assert tuple(metadata.columns[: len(rxrx1.METADATA_COLUMNS)]) == rxrx1.METADATA_COLUMNS
    assert sorted(path.name for path in root.iterdir()) == ["images", "metadata.csv"]
    assert metadata.height == sum(train + test for train, test in data.RXRX1_SITES.values())
    assert all(path.is_file() for row in metadata.iter_rows(named=True) for path in rxrx1.site_paths(root, row))
    site = rxrx1.load_site(root, metadata.row(0, named=True))
    assert site.shape == (6, 512, 512) and site.dtype == np.uint8 and site.std() > 0
    assert metadata.group_by("well_id").agg(pl.col("dataset").n_unique())["dataset"].max() == 1


@pytest.mark.slow
@pytest.mark.parametrize("dataset", ["celeba", "rxrx1"])
def test_trust_subsets_resolve_at_the_rehearsal_settings(work, dataset):
    """In every regime: the queried conditions, a support larger than the generators' validation images,
    a scorer that fits and calibrates on it and scores every query, and selection's real rows per query."""
    trust = CONFIG["trust"]
    subset = trust["datasets"][dataset].get("subset", {})
    table = trust_data.real_table(dataset, under(work, f"trust.datasets.{dataset}.root"))
    queried = trust_data.queried_conditions(dataset, table, **subset)
    assert queried["seen"].any() and not queried["seen"].all()
    names = list(trust_data.ATTRIBUTE_NAMES[dataset])
    attributes, wanted = trust_data.attributes_of(dataset, table), queried.select(names).to_numpy()
    rng = np.random.default_rng(0)
    for regime in trust["regimes"]:
        support = trust_data.training_support(dataset, table, regime, subset.get("held_out_pairs", 100))
        assert support.sum() > trust["generator_training"]["val_images"]
        groups = trust_data.calibration_units(dataset, table, support)
        real, samples = rng.normal(size=(support.sum(), 8)), rng.normal(size=(len(wanted), 8))
        fit_and_score(
            real, attributes[support], samples, wanted, names, options=ScorerOptions(**trust["scorer"]), groups=groups
        )
        outside = attributes[~support]
        for condition in wanted:
            assert (outside == condition).all(axis=1).sum() >= trust["selection"]["min_real"], (regime, condition)


@pytest.mark.slow
def test_rxrx1_queries_span_cell_types_and_controls(work):
    table = trust_data.real_table("rxrx1", under(work, "trust.datasets.rxrx1.root"))
    subset = CONFIG["trust"]["datasets"]["rxrx1"]["subset"]
    held = rxrx1.held_out_pairs(table, subset["held_out_pairs"])
    picked = rxrx1.condition_subset(table, held, subset["n_each"], subset["min_count"])
    assert picked.group_by("seen").len().sort("seen")["len"].to_list() == [subset["n_each"]] * 2
    assert (picked["n"] >= subset["min_count"]).all() and held.height > subset["n_each"]
    assert picked["cell_type_id"].n_unique() == 4
    for seen in (False, True):
        assert picked.filter(pl.col("seen") == seen)["control"].n_unique() == 2


@pytest.mark.slow
def test_the_same_seed_writes_the_same_bytes(written, tmp_path):
    """Every file of a second write equals the first's (whose folder also holds what the fetch brought in)."""
    root, _ = written
    data.write_rehearsal_data(CONFIG, tmp_path / "work", tmp_path / "serve", seed=0)
    for folder in ("serve", "work"):
        again, first = every_file(tmp_path / folder), every_file(root / folder)
        assert again and again == {name: digest for name, digest in first.items() if name in again}

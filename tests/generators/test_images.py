"""The generated-image layout: PNGs and a Parquet manifest that round-trip, and bad manifests refused by name."""

import numpy as np
import polars as pl
import pytest
from PIL import Image

from condeval.core.io import DataFileError
from condeval.generators.images import read_image_manifest, write_generated_images


def _images(n):
    rng = np.random.default_rng(0)
    return [Image.fromarray(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)) for _ in range(n)]


def test_images_round_trip_through_the_manifest(tmp_path):
    images = _images(3)
    write_generated_images(
        images, [5, 9, 11], ["a", "b", "c"], [1, 2, 3], tmp_path / "shard-0", tmp_path / "shard-0.parquet"
    )
    ids, paths = read_image_manifest(tmp_path / "shard-0.parquet")
    assert ids.tolist() == [5, 9, 11]
    for image, path in zip(images, paths):
        np.testing.assert_array_equal(np.asarray(Image.open(path)), np.asarray(image))  # PNG is lossless


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        ({"image_id": [1], "file": ["../outside.png"]}, "leaves"),
        ({"image_id": [1, 1], "file": ["a.png", "a.png"]}, "more than once"),
        ({"image_id": [1], "file": ["missing.png"]}, "does not exist"),
        ({"image_id": [1]}, "required field 'file' is missing"),
        ({"image_id": [1, 2], "file": ["a.png", None]}, "record 1: 'file' is null"),
        ({"image_id": [None, 2], "file": ["a.png", "a.png"]}, "record 0: 'image_id' is null"),
        ({"image_id": [1.0, 2.5], "file": ["a.png", "a.png"]}, "'image_id' must be of integer type"),
    ],
)
def test_a_bad_manifest_is_refused_naming_the_file_and_record(tmp_path, frame, message):
    (tmp_path / "data").mkdir()
    _images(1)[0].save(tmp_path / "data" / "a.png")
    _images(1)[0].save(tmp_path / "outside.png")
    manifest = tmp_path / "data" / "manifest.parquet"
    pl.DataFrame(frame).write_parquet(manifest)
    with pytest.raises(DataFileError, match=message) as error:
        read_image_manifest(manifest)
    assert "manifest.parquet" in str(error.value)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        ({"image_ids": [5, 5]}, ValueError, "image id 5 appears more than once"),
        ({"image_ids": [5, -1]}, ValueError, r"image_ids\[1\] must be an integer >= 0"),
        ({"image_ids": [5, 1.5]}, TypeError, r"image_ids\[1\] must be an integer >= 0; got float"),
        ({"seeds": [1, None]}, TypeError, r"seeds\[1\] must be an integer >= 0"),
        ({"prompts": ["a"]}, ValueError, "got lengths"),
        ({"prompts": "ab"}, TypeError, "prompts must be a sequence of str, one per image"),
        ({"prompts": ["a", None]}, TypeError, "prompts must be a sequence of str"),
        ({"images": [np.zeros((8, 8, 3), np.uint8)] * 2}, TypeError, r"images\[0\] must be a PIL image"),
        ({"folder": "../elsewhere"}, ValueError, "must lie beside or below the manifest's folder"),
    ],
)
def test_what_the_reader_would_refuse_is_not_written(tmp_path, call, error, message):
    """A call refused before any file is written: no PNG folder without its manifest, and never a manifest
    that read_image_manifest refuses (a repeated id overwrote its first PNG)."""
    (tmp_path / "run").mkdir()
    arguments = {
        "images": _images(2),
        "image_ids": [5, 9],
        "prompts": ["a", "b"],
        "seeds": [1, 2],
        "folder": "shard-0",
    } | call
    arguments["folder"] = tmp_path / "run" / arguments["folder"]
    with pytest.raises(error, match=message):
        write_generated_images(**arguments, manifest=tmp_path / "run" / "shard-0.parquet")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["run"]

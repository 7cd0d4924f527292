"""Generated samples on disk: RGB, single-channel and six-channel samples round-trip through their manifest, bad
manifests are refused naming the manifest and the record, and a sample's noise seed depends on its
condition and index alone."""

import numpy as np
import polars as pl
import pytest

from condeval.core.io import DataFileError, write_folder_manifest, write_parquet
from condeval.trust.samples import read_samples, sample_feature_files, sample_seed, shard_conditions, write_samples

NAMES = ["a", "b"]


def _write(tmp_path, channels: int, n: int = 6):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (n, channels, 8, 8), dtype=np.uint8)
    attributes = np.array([[i % 2, i % 3] for i in range(n)])
    frame = write_samples(
        images,
        attributes,
        NAMES,
        np.arange(n),
        np.arange(10, 10 + n),
        tmp_path / "shard-0",
        tmp_path / "shard-0.parquet",
    )
    return images, attributes, frame


@pytest.mark.parametrize("channels", [1, 3, 6])
def test_samples_round_trip(tmp_path, channels):
    images, attributes, _ = _write(tmp_path, channels)
    frame, read = read_samples(tmp_path / "shard-0.parquet", NAMES)
    np.testing.assert_array_equal(read, images)
    np.testing.assert_array_equal(frame.select(NAMES).to_numpy(), attributes)
    assert frame["sample_id"].to_list() == list(range(10, 16))
    if channels == 6:  # RxRx1's site layout: one grey PNG per channel
        assert (tmp_path / "shard-0" / "0_0" / "0000010_w6.png").is_file()
    some, pixels = read_samples(tmp_path / "shard-0.parquet", NAMES, keep=lambda ids: ids % 2 == 1)
    assert some["sample_id"].to_list() == [11, 13, 15]
    np.testing.assert_array_equal(pixels, images[1::2])


def _corrupt(tmp_path, **columns):
    _write(tmp_path, 3)
    frame = pl.read_parquet(tmp_path / "shard-0.parquet").with_columns(**columns)
    write_parquet(frame, tmp_path / "shard-0.parquet")


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ({"file": pl.lit("../../outside.png")}, "leaves the manifest's folder"),
        ({"file": pl.lit("shard-0/0_0/9999999.png")}, "is missing"),
        ({"sample_id": pl.lit(3)}, "more than once"),
    ],
)
def test_bad_manifests_name_the_manifest_and_the_record(tmp_path, columns, message):
    _corrupt(tmp_path, **columns)
    with pytest.raises(DataFileError, match=message) as error:
        read_samples(tmp_path / "shard-0.parquet", NAMES)
    assert "shard-0.parquet" in str(error.value) and "sample" in str(error.value)


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ({"file": pl.when(pl.col("sample_id") == 11).then(None).otherwise(pl.col("file"))}, "record 1: 'file' is null"),
        ({"channels": pl.lit(None, pl.Int64)}, "record 0: 'channels' is null"),
        ({"sample_id": pl.lit(None, pl.Int64)}, "record 0: 'sample_id' is null"),
        ({"a": pl.lit(None, pl.Int64)}, "record 0: 'a' is null"),
        (
            {"sample_id": pl.col("sample_id").cast(pl.Float64) + 0.5},
            "'sample_id' must be of integer type; it is Float64",
        ),
        ({"file": pl.lit(1)}, "'file' must be of string type"),
    ],
)
def test_a_null_or_a_value_of_another_type_is_refused_naming_the_manifest_and_column(tmp_path, columns, message):
    _corrupt(tmp_path, **columns)
    with pytest.raises(DataFileError, match=f"shard-0.parquet: {message}"):
        read_samples(tmp_path / "shard-0.parquet", NAMES)


def test_a_missing_column_is_named(tmp_path):
    _write(tmp_path, 3)
    write_parquet(pl.read_parquet(tmp_path / "shard-0.parquet").drop("b"), tmp_path / "shard-0.parquet")
    with pytest.raises(DataFileError, match="required field 'b' is missing"):
        read_samples(tmp_path / "shard-0.parquet", NAMES)


def test_seeds_depend_on_the_condition_and_index_alone_and_shards_partition():
    assert sample_seed(0, (1, 0), 3) == sample_seed(0, np.array([1, 0]), 3)
    seeds = {sample_seed(0, c, i) for c in [(0, 0), (0, 1), (1, 0)] for i in range(50)} | {sample_seed(1, (0, 0), 0)}
    assert len(seeds) == 151
    conditions = np.arange(14).reshape(7, 2)
    shards = [shard_conditions(conditions, s, 3) for s in range(3)]
    np.testing.assert_array_equal(np.sort(np.concatenate(shards), axis=0), conditions)
    with pytest.raises(ValueError, match="shard"):
        shard_conditions(conditions, 3, 3)


def test_a_conditions_samples_do_not_depend_on_the_shard_or_batch_that_draws_them(attribute_pipeline):
    from condeval.trust.samples import SamplingSettings, generate_samples

    pipe = attribute_pipeline()
    pipe.set_progress_bar_config(disable=True)
    sampling = SamplingSettings(per_condition=3, num_inference_steps=2, seed=0)
    alone, attributes, seeds, ids = generate_samples(pipe, [[1, 2]], sampling, first_id=6)
    in_pairs = SamplingSettings(per_condition=3, num_inference_steps=2, seed=0, batch_size=2)
    together, *_ = generate_samples(pipe, [[0, 0], [1, 2]], in_pairs)
    np.testing.assert_array_equal(alone, together[3:])
    assert alone.dtype == np.uint8 and alone.shape == (3, 3, 16, 16)
    assert ids.tolist() == [6, 7, 8] and attributes.tolist() == [[1, 2]] * 3
    assert len(set(seeds.tolist())) == 3


def test_a_shards_feature_files_are_found_by_extractor_and_a_missing_one_is_named(tmp_path):
    folders = [tmp_path / "shard-0", tmp_path / "shard-1"]
    for folder in folders:
        folder.mkdir()
        (folder / "dinov3.safetensors").write_bytes(b"")
    (folders[0] / "siglip.safetensors").write_bytes(b"")
    assert sample_feature_files(folders, "dinov3") == [folder / "dinov3.safetensors" for folder in folders]
    manifests = [write_folder_manifest(folder, f"{folder}.sha256") for folder in folders]
    assert sample_feature_files(manifests, "dinov3") == [folder / "dinov3.safetensors" for folder in folders]
    (folders[1] / "dinov3.safetensors").write_bytes(b"changed")
    with pytest.raises(DataFileError, match="shard-1.sha256"):
        sample_feature_files(manifests, "dinov3")
    with pytest.raises(DataFileError, match=r"shard-1: no siglip features .*\['dinov3'\]"):
        sample_feature_files(folders, "siglip")


def test_writing_samples_outside_the_manifests_folder_is_refused_before_anything_is_written(tmp_path):
    """read_samples refuses a file that leaves the manifest's folder, so write_samples must not write one."""

    images = np.zeros((1, 3, 4, 4), np.uint8)
    with pytest.raises(ValueError, match="beside or below"):
        write_samples(images, [[0]], ["a"], [0], [0], tmp_path / "elsewhere", tmp_path / "manifests" / "m.parquet")
    assert not (tmp_path / "elsewhere").exists()


def test_wrong_arguments_are_refused_naming_what_was_given(tmp_path):
    with pytest.raises(TypeError, match=r"images must be uint8 pixels 0..255; got float64"):
        write_samples(np.zeros((1, 3, 4, 4)), [[0]], ["a"], [0], [0], tmp_path / "s", tmp_path / "s.parquet")
    _write(tmp_path, 3)
    with pytest.raises(TypeError, match=r"a list of attribute columns, e.g. \['a'\]"):
        read_samples(tmp_path / "shard-0.parquet", "a")


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        ({"images": np.zeros((2, 16, 16, 3), np.uint8)}, ValueError, r"look like \(N, H, W, C\)"),
        ({"names": ["a"]}, ValueError, r"1 names for 2 attributes"),
        ({"names": ["a", "trust"]}, ValueError, "taken by the scores' own columns"),
        ({"attributes": [[0.6, 1.0], [1.7, 0.0]]}, TypeError, "attributes must hold integers; got dtype float64"),
        ({"sample_ids": [5, 5]}, ValueError, "sample id 5 appears more than once"),
        ({"seeds": [1]}, ValueError, "2 images, 1 seeds, 2 sample ids"),
        ({"sample_ids": [5, -2]}, ValueError, r"sample_ids\[1\] must be an integer >= 0"),
        ({"seeds": None}, TypeError, "seeds must be a sequence of non-negative integers"),
    ],
)
def test_what_read_samples_would_refuse_or_misread_is_not_written(tmp_path, change, error, message):
    """Before, each of these wrote: an (N, H, W, C) array as 32 grey channels of 32 x 3 pixels, a manifest
    missing the fourth attribute, floats truncated onto other conditions, one PNG overwriting another, or a
    folder left without its manifest."""
    arguments = {
        "images": np.zeros((2, 3, 8, 8), np.uint8),
        "attributes": [[0, 1], [1, 0]],
        "names": ["a", "b"],
        "seeds": [1, 2],
        "sample_ids": [5, 6],
    } | change
    with pytest.raises(error, match=message):
        write_samples(**arguments, folder=tmp_path / "s", manifest=tmp_path / "s.parquet")
    assert list(tmp_path.iterdir()) == []


class _Killed(RuntimeError):
    pass


class _Dying:
    """A pipeline that dies when asked for the condition ``at``, recording what it was asked to draw."""

    def __init__(self, pipe, at):
        self.pipe, self.at, self.calls = pipe, at, []

    def __call__(self, attributes, **kwargs):
        self.calls.append(attributes.tolist())
        if self.at is not None and attributes.tolist()[0] == self.at:
            raise _Killed("the job's time ran out")
        return self.pipe(attributes, **kwargs)


def _files(folder) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_shard_drawn_chunk_by_chunk_and_killed_midway_resumes_to_the_same_bytes_as_one_pass(
    tmp_path, attribute_pipeline
):
    from condeval.core.chunks import scratch_folder
    from condeval.trust.samples import SampleShard, SamplingSettings, generate_sample_shard, generate_samples

    pipe = attribute_pipeline()
    pipe.set_progress_bar_config(disable=True)
    conditions, first_ids = np.array([[0, 0], [1, 2], [0, 1]]), [0, 6, 12]
    one_pass = SamplingSettings(per_condition=2, num_inference_steps=2, seed=0)
    parts = [generate_samples(pipe, [c], one_pass, first_id=f) for c, f in zip(conditions, first_ids)]
    images, attributes, seeds, ids = (np.concatenate([part[i] for part in parts]) for i in range(4))
    write_samples(images, attributes, NAMES, seeds, ids, tmp_path / "one" / "shard", tmp_path / "one" / "shard.parquet")

    draw = _Dying(pipe, at=[0, 1])
    chunked, manifest = tmp_path / "chunked" / "shard", tmp_path / "chunked" / "shard.parquet"
    shard = SampleShard(conditions, first_ids, NAMES)
    sampling = SamplingSettings(per_condition=2, num_inference_steps=2, seed=0, batch_size=2)
    arguments = dict(chunk_size=2, fingerprint={"m": 1})
    with pytest.raises(_Killed):
        generate_sample_shard(draw, shard, chunked, manifest, sampling, **arguments)
    assert not manifest.exists() and len(list(scratch_folder(manifest).glob("chunk-*"))) == 2
    draw.at, draw.calls = None, []
    frame = generate_sample_shard(draw, shard, chunked, manifest, sampling, **arguments)
    assert draw.calls == [[[0, 1], [0, 1]]]  # only the unfinished condition is drawn again
    assert _files(chunked) == _files(tmp_path / "one" / "shard")
    assert manifest.read_bytes() == (tmp_path / "one" / "shard.parquet").read_bytes()
    assert frame["sample_id"].to_list() == ids.tolist() and not scratch_folder(manifest).exists()
    read_samples(manifest, NAMES)  # the files the manifest names are where it says


def test_a_shards_features_are_written_a_chunk_at_a_time_and_a_finished_extractor_is_not_redone(tmp_path):
    from condeval.core.chunks import scratch_folder
    from condeval.encoders.shards import read_feature_shards
    from condeval.trust.samples import encode_sample_shard

    images, _, frame = _write(tmp_path, 3, n=6)
    reads = []

    class Mean:
        identity, feature = {"name": "mean", "weights_sha256": "m"}, "mean"

        def encode(self, batch, batch_size):
            reads.append(len(batch))
            return batch.reshape(len(batch), 3, -1).mean(-1).astype(np.float32)

    class Failing(Mean):
        identity = {"name": "failing", "weights_sha256": "f"}

        def encode(self, batch, batch_size):
            raise _Killed("out of memory")

    folder, manifest = tmp_path / "features", tmp_path / "shard-0.parquet"
    with pytest.raises(_Killed):
        encode_sample_shard(manifest, NAMES, {"mean": Mean, "other": Failing}, folder, batch_size=2, chunk_size=4)
    assert reads == [4, 2] and not folder.exists()  # memory held a chunk of images, never the shard
    assert (scratch_folder(folder) / "mean.safetensors").is_file()
    reads.clear()
    shapes = encode_sample_shard(manifest, NAMES, {"mean": Mean, "other": Mean}, folder, batch_size=2, chunk_size=4)
    assert reads == [4, 2] and shapes == {"mean": (6, 3), "other": (6, 3)}  # "mean" was read back, not redone
    ids, features, _ = read_feature_shards([folder / "mean.safetensors"])
    np.testing.assert_allclose(features, images.reshape(6, 3, -1).mean(-1))
    assert ids.tolist() == frame["sample_id"].to_list() and not scratch_folder(folder).exists()

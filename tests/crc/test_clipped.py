"""The clipped-CLIPScore table: per benchmark and model, how many masked samples and unmasked pairs sit at 0."""

import polars as pl
import pytest

from condeval.crc.evaluate import clipped_table, read_clipped_samples
from condeval.crc.report import clipped_markdown


def _samples(clipscores, shares, models=None):
    frame = pl.DataFrame({"key": range(len(shares)), "clipscore": clipscores, "clipped_share": shares})
    return frame if models is None else frame.with_columns(model=pl.Series(models))


def test_shares_are_means_over_pairs_per_benchmark_and_model():
    frames = {
        "polaris": _samples([0.0, 0.4, 0.0, 1.1], [1.0, 0.0, 0.5, 0.25], ["tiny", "tiny", "tiny", "base"]),
        "foil_it": _samples([0.3, 0.6], [0.0, 0.0], ["tiny", "tiny"]),
    }
    table = clipped_table(frames)
    assert table.columns == ["benchmark", "model", "pairs", "masked_clipped", "masked_clipped_low"] + [
        "masked_clipped_high",
        "unmasked_clipped",
        "unmasked_clipped_low",
        "unmasked_clipped_high",
    ]
    assert table.select("benchmark", "model", "pairs", "masked_clipped", "unmasked_clipped").rows() == [
        ("polaris", "tiny", 3, pytest.approx(0.5), pytest.approx(2 / 3)),
        ("polaris", "base", 1, 0.25, 0.0),
        ("foil_it", "tiny", 2, 0.0, 0.0),
    ]


def test_frames_without_a_model_column_give_one_row_per_benchmark():
    table = clipped_table({"flickr8k": _samples([0.0, 0.0], [1.0, 1.0])})
    assert table.select("benchmark", "pairs", "masked_clipped", "unmasked_clipped").rows() == [
        ("flickr8k", 2, 1.0, 1.0)
    ]
    assert table["model"].to_list() == [None]
    assert "| flickr8k  | –     | 2     | 100.00" in clipped_markdown(table, {})


def test_the_markdown_labels_models_and_gives_percentages():
    table = clipped_table({"rich_hf": _samples([0.0, 0.5, 0.7, 0.9], [0.125, 0.0, 0.0, 0.0], ["tiny-clip"] * 4)})
    text = clipped_markdown(table, {"tiny-clip": "tiny CLIP"})
    assert "masked samples at 0 (%)" in text and "unmasked pairs at 0 (%)" in text
    assert "| rich_hf   | tiny CLIP | 4     | 3.12 (" in text and "| 25.00 (" in text


def test_each_share_has_its_interval_over_the_images_a_pairs_image_drawn_whole():
    from condeval.core.conformal import unit_mean_interval

    shares = [0.0, 0.5, 0.5, 0.0, 0.25, 0.0, 1.0, 0.0]
    images = ["a", "a", "b", "b", "c", "c", "d", "d"]
    frame = _samples([0.1] * 8, shares).with_columns(image=pl.Series(images))
    row = clipped_table({"polaris": frame}).row(0, named=True)
    assert (row["masked_clipped_low"], row["masked_clipped_high"]) == pytest.approx(unit_mean_interval(shares, images))
    assert row["masked_clipped_low"] < row["masked_clipped"] < row["masked_clipped_high"]
    pairs = clipped_table({"polaris": frame.drop("image")}).row(0, named=True)
    assert (pairs["masked_clipped_low"], pairs["masked_clipped_high"]) == pytest.approx(unit_mean_interval(shares))
    assert (pairs["masked_clipped_low"], pairs["masked_clipped_high"]) != pytest.approx(
        (row["masked_clipped_low"], row["masked_clipped_high"])
    )


@pytest.mark.parametrize(
    ("frames", "message"),
    [
        ({}, "at least one benchmark"),
        ({"polaris": _samples([0.1], [0.0]).drop("clipped_share")}, r"'polaris'.*no column \['clipped_share'\]"),
        ({"polaris": _samples([], [])}, "'polaris': no sampled pairs"),
        ({"foil_it": _samples([0.1, 0.2], [0.0, 1.5])}, "'foil_it', pair key 1: clipped_share 1.5"),
        ({"foil_it": _samples([0.1, 0.2], [None, 0.5])}, "'foil_it', pair key 0: clipped_share None"),
    ],
)
def test_bad_samples_are_refused_naming_the_benchmark(frames, message):
    with pytest.raises(ValueError, match=message):
        clipped_table(frames)


def test_shards_are_read_per_benchmark_with_their_model(tmp_path):
    paths = {}
    for model, benchmark, shard, shares in [
        ("tiny", "polaris", 0, [1.0]),
        ("tiny", "polaris", 1, [0.5, 0.0]),
        ("base", "polaris", 0, [0.25]),
        ("tiny", "rich_hf", 0, [0.0]),
    ]:
        paths[(model, benchmark, shard)] = tmp_path / f"{model}-{benchmark}-{shard}.parquet"
        _samples([0.5] * len(shares), shares).with_columns(samples=pl.lit([0.0, 1.0])).write_parquet(
            paths[(model, benchmark, shard)]
        )
    shards = {
        "tiny": {
            "polaris": [paths[("tiny", "polaris", 0)], paths[("tiny", "polaris", 1)]],
            "rich_hf": [paths[("tiny", "rich_hf", 0)]],
        },
        "base": {"polaris": [paths[("base", "polaris", 0)]]},
    }
    frames = read_clipped_samples(shards)
    assert list(frames) == ["polaris", "rich_hf"] and "samples" not in frames["polaris"].columns
    captions = {}
    for benchmark in ("polaris", "rich_hf"):
        captions[benchmark] = tmp_path / f"{benchmark}-captions.parquet"
        pl.DataFrame({"key": [1, 0], "path": ["b.jpg", "a.jpg"]}).write_parquet(captions[benchmark])
    joined = read_clipped_samples(shards, captions)
    assert joined["polaris"]["image"].to_list() == ["a.jpg", "a.jpg", "b.jpg", "a.jpg"]
    pl.DataFrame({"key": [1], "path": ["b.jpg"]}).write_parquet(captions["rich_hf"])
    with pytest.raises(ValueError, match=r"tiny-rich_hf-0.parquet: pair key 0 is not in the captions table .*rich_hf"):
        read_clipped_samples(shards, captions)
    assert frames["polaris"]["model"].to_list() == ["tiny", "tiny", "tiny", "base"]
    assert clipped_table(frames).select("benchmark", "model", "masked_clipped").rows() == [
        ("polaris", "tiny", 0.5),
        ("polaris", "base", 0.25),
        ("rich_hf", "tiny", 0.0),
    ]


def test_a_shard_written_before_clipped_share_existed_is_named(tmp_path):
    old = tmp_path / "shard-0.parquet"
    _samples([0.5], [0.0]).drop("clipped_share").write_parquet(old)
    with pytest.raises(ValueError, match=rf"{old}: the samples have no column \['clipped_share'\].*resample"):
        read_clipped_samples({"tiny": {"polaris": [old]}})

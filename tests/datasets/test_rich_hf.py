"""RichHF-18K TFRecords: written and read back without TensorFlow, prompts joined from Pick-a-Pic."""

import logging
import struct

import polars as pl
import pytest

from condeval.datasets import DatasetFormatError
from condeval.datasets.rich_hf import pick_a_pic_prompts, read_rich_hf, split_prompt, write_rich_hf

PROMPTS = {"u1": "A red bus, on a road.", "u2": 'two "blue" cats; sleeping', "u3": "a dog"}


def test_prompt_split_is_the_datasets_own():
    assert split_prompt("A red bus, on a road.") == ["A", "red", "bus", "on", "a", "road"]
    assert split_prompt('two "blue" cats; sleeping?!') == ["two", "blue", "cats", "sleeping"]


def test_round_trip_labels_scores_and_dropped_records(tmp_path, caplog):
    path = tmp_path / "test.tfrecord"
    write_rich_hf(
        path,
        [
            {
                "filename": "u1.png",
                "prompt_misalignment_label": "1 0 0 1 1 1",
                "misalignment_score": 2.5,
                "overall_score": 3.0,
            },
            {
                "filename": "u2.png",
                "prompt_misalignment_label": "1 1 1 0",
                "misalignment_score": 1.0,
                "overall_score": 4.0,
            },
            {
                "filename": "u3.png",
                "prompt_misalignment_label": "1 1 1",
                "misalignment_score": 5.0,
                "overall_score": 5.0,
            },  # 2 tokens
        ],
    )
    with caplog.at_level(logging.INFO, logger="condeval"):
        frame = read_rich_hf(path, PROMPTS)
    assert "2 records kept, 1 dropped" in caplog.text
    assert frame["image_uid"].to_list() == ["u1", "u2"]
    assert frame["words"][0].to_list() == ["A", "red", "bus", "on", "a", "road"]
    assert frame["labels"][0].to_list() == [0, 1, 1, 0, 0, 0]  # the dataset's 0 (misaligned) is our error
    assert frame["misalignment_score"].to_list() == [2.5, 1.0]
    assert frame["caption"][1] == PROMPTS["u2"]


def test_the_file_is_a_real_tfrecord(tmp_path):
    """The framing TensorFlow reads: little-endian uint64 length, masked CRC, payload, masked CRC."""
    path = tmp_path / "dev.tfrecord"
    write_rich_hf(path, [{"filename": "u3.png", "prompt_misalignment_label": "1 1"}])
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    assert len(data) == 8 + 4 + length + 4
    assert b"prompt_misalignment_label" in data[12 : 12 + length]


def test_bad_records_are_named(tmp_path):
    path = tmp_path / "train.tfrecord"
    write_rich_hf(
        path,
        [
            {"filename": "u1.png", "prompt_misalignment_label": "1 1 1 1 1 1"},
            {"filename": "u9.png", "prompt_misalignment_label": "1"},
        ],
    )
    with pytest.raises(
        DatasetFormatError, match=r"train.tfrecord: record 1 \(u9.png\): no Pick-a-Pic prompt for image uid u9"
    ):
        read_rich_hf(path, PROMPTS)
    write_rich_hf(path, [{"filename": "u3.png", "prompt_misalignment_label": "1 2"}])
    with pytest.raises(DatasetFormatError, match="record 0 .*must hold 0/1"):
        read_rich_hf(path, PROMPTS)
    write_rich_hf(path, [{"filename": f"u{k}.png", "prompt_misalignment_label": "1 1"} for k in (1, 2, 3)])
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(DatasetFormatError, match="train.tfrecord: record 2 is truncated"):
        read_rich_hf(path, PROMPTS)
    with pytest.raises(DatasetFormatError, match="file not found"):
        read_rich_hf(tmp_path / "absent.tfrecord", PROMPTS)


def test_images_and_pick_a_pic_prompts(tmp_path):
    pl.DataFrame(
        {"caption": ["a dog", "a cat"], "image_0_uid": ["u3", "u7"], "image_1_uid": ["u4", "u8"]}
    ).write_parquet(tmp_path / "pap.parquet")
    prompts = pick_a_pic_prompts([tmp_path / "pap.parquet"])
    assert prompts == {"u3": "a dog", "u4": "a dog", "u7": "a cat", "u8": "a cat"}
    path = tmp_path / "test.tfrecord"
    write_rich_hf(path, [{"filename": "u3.png", "prompt_misalignment_label": "1 0"}])
    with pytest.raises(DatasetFormatError, match="image .*u3.png is missing"):
        read_rich_hf(path, prompts, tmp_path)
    (tmp_path / "u3.png").write_bytes(b"")
    assert read_rich_hf(path, prompts, tmp_path)["path"][0].endswith("u3.png")
    pl.DataFrame({"caption": ["a dog"]}).write_parquet(tmp_path / "bad.parquet")
    with pytest.raises(DatasetFormatError, match="bad.parquet: Pick-a-Pic column missing"):
        pick_a_pic_prompts([tmp_path / "bad.parquet"])

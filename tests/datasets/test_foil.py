"""FOIL-it and FOIL-nocaps loaders on fixture files in the released formats."""

import json
import logging

import pytest

from condeval.datasets import DatasetFormatError
from condeval.datasets.foil import load_foil_it, load_foil_nocaps, normalize_caption


def _foil_it(tmp_path, annotations, images=({"id": 9, "file_name": "COCO_val2014_000000000009.jpg"},)):
    path = tmp_path / "foilv1.0_test_2017.json"
    path.write_text(json.dumps({"info": {}, "licenses": [], "images": list(images), "annotations": annotations}))
    return path


def _pair(pair_id, original, foiled, image_id=9, target="dog", foil_word="cat"):
    common = {"id": pair_id, "image_id": image_id, "target_word": target, "foil_word": foil_word}
    return [{**common, "caption": original, "foil": False}, {**common, "caption": foiled, "foil": True}]


def test_normalization_is_the_official_one():
    assert normalize_caption("A Dog, sitting on the mat!  ") == ["a", "dog", "sitting", "on", "the", "mat"]
    assert normalize_caption("it's a 2-way street") == ["its", "a", "2way", "street"]


def test_pairs_become_word_labelled_captions(tmp_path, caplog):
    annotations = [
        *_pair(7, "A dog on a mat.", "A cat on a mat."),
        *_pair(3, "Two dogs play", "Two dogs eat", target="play", foil_word="eat"),
        *_pair(5, "A traffic light", "A hydrant", target="traffic light", foil_word="hydrant"),  # counts differ
        *_pair(11, "the dog sees the dog", "the cat sees the cat"),  # the first difference is the error
    ]
    with caplog.at_level(logging.INFO, logger="condeval"):
        frame = load_foil_it(_foil_it(tmp_path, annotations[::-1]))
    assert "3 pairs kept, 1 dropped" in caplog.text
    assert frame["pair_id"].to_list() == [3, 3, 7, 7, 11, 11]
    assert frame["foil"].to_list() == [False, True] * 3
    assert frame["labels"][5].to_list() == [0, 1, 0, 0, 0]
    assert frame["words"][3].to_list() == ["a", "cat", "on", "a", "mat"]
    assert frame["labels"][3].to_list() == [0, 1, 0, 0, 0]
    assert frame["labels"][1].to_list() == [0, 0, 1]
    assert frame["labels"][0].to_list() == [0, 0, 0]
    assert frame["caption"][2] == "A dog on a mat."


def test_image_paths_are_checked(tmp_path):
    path = _foil_it(tmp_path, _pair(1, "a dog", "a cat"))
    with pytest.raises(DatasetFormatError, match="image 9 is listed but .*000000000009.jpg is missing"):
        load_foil_it(path, tmp_path)
    (tmp_path / "COCO_val2014_000000000009.jpg").write_bytes(b"")
    assert load_foil_it(path, tmp_path)["path"][0].endswith("COCO_val2014_000000000009.jpg")


@pytest.mark.parametrize(
    "annotations,message",
    [
        (_pair(1, "a dog", "a cat")[:1], "annotation id 1 has no foil caption"),
        (_pair(1, "a dog", "a cat")[1:], "annotation id 1 has no original caption"),
        (_pair(1, "a dog", "a cat") + _pair(1, "a dog", "a cow")[1:], r"duplicate annotation id \(1, True\)"),
        (_pair(1, "a dog", "A dog!"), "annotation id 1: the foil caption equals the original"),
        (
            [{k: v for k, v in a.items() if k != "foil_word"} for a in _pair(4, "a dog", "a cat")],
            r"annotations\[0\] \(id 4\) lacks field 'foil_word'",
        ),
        (_pair(1, "a dog", "a cat", image_id=8), "annotation 1 refers to image 8, which is not listed"),
    ],
)
def test_malformed_records_are_named(tmp_path, annotations, message):
    with pytest.raises(DatasetFormatError, match=message) as error:
        load_foil_it(_foil_it(tmp_path, annotations))
    assert "foilv1.0_test_2017.json" in str(error.value)


def _nocaps(tmp_path, records):
    path = tmp_path / "nocaps-val-foil.json"
    path.write_text(json.dumps(records))
    return path


def _record(baseline="a red bus on a road", foil="a red boat on a road", domain="near"):
    return {
        "image_path": "val/0001.jpg",
        "references": ["a bus", "a red bus"],
        "baseline": baseline,
        "foil": foil,
        "replacement": ["bus", "boat"],
        "domain": domain,
    }


def test_foil_nocaps_records_become_word_labelled_captions(tmp_path):
    frame = load_foil_nocaps(
        _nocaps(tmp_path, [_record(), _record(domain="out"), _record(foil="a red sail boat on a road")])
    )
    assert len(frame) == 4  # the third record's counts differ
    assert frame["domain"].to_list() == ["near", "near", "out", "out"]
    assert frame["labels"][1].to_list() == [0, 0, 1, 0, 0, 0]
    assert frame["references"][0].to_list() == ["a bus", "a red bus"]
    with pytest.raises(DatasetFormatError, match="image .*val/0001.jpg is missing"):
        load_foil_nocaps(_nocaps(tmp_path, [_record()]), tmp_path)


@pytest.mark.parametrize(
    "records,message",
    [
        ({"baseline": "x"}, "expected a JSON list"),
        ([{k: v for k, v in _record().items() if k != "domain"}], "record 0 lacks field 'domain'"),
        ([_record(), _record(domain="far")], "record 1 has domain 'far'"),
        ([{**_record(), "replacement": "bus"}], r"record 0: 'replacement' must be \[original word, foil word\]"),
        ([_record(foil="A red bus on a road.")], "record 0: the foil caption equals the original"),
    ],
)
def test_malformed_nocaps_records_are_named(tmp_path, records, message):
    with pytest.raises(DatasetFormatError, match=message) as error:
        load_foil_nocaps(_nocaps(tmp_path, records))
    assert "nocaps-val-foil.json" in str(error.value)

"""Issue 17: every loader refuses a bad record naming the file and the record, never a raw polars
or attribute error; paths stay under their data root; dropped rows are counted by reason."""

import json
import logging

import pandas as pd
import polars as pl
import pytest
from tfrecord.writer import TFRecordWriter

from condeval.datasets import DatasetFormatError, counting_dropped_rows
from condeval.datasets.coco import load_captions
from condeval.datasets.foil import load_foil_it, load_foil_nocaps
from condeval.datasets.judgments import load_flickr8k_expert, load_pickled_judgments, load_polaris
from condeval.datasets.rich_hf import read_rich_hf, write_rich_hf

PROMPTS = {"u1": "a red bus", "u2": "a dog", "u3": "two cats"}


# --- COCO captions and FOIL-it (COCO layout) ---------------------------------------------------


def _coco(tmp_path, image=None, annotation=None, name="captions_val2014.json"):
    image = {"id": 9, "width": 64, "height": 64, "file_name": "COCO_val2014_000000000009.jpg", **(image or {})}
    annotation = {"id": 90, "image_id": 9, "caption": "A red circle.", **(annotation or {})}
    path = tmp_path / name
    path.write_text(json.dumps({"info": {}, "licenses": [], "images": [image], "annotations": [annotation]}))
    return path


@pytest.mark.parametrize(
    "image,annotation,message",
    [
        (
            {"file_name": "../../outside.jpg"},
            None,
            r"images\[0\] \(id 9\): 'file_name' '../../outside.jpg' leaves the data root",
        ),
        ({"file_name": "/etc/passwd"}, None, r"images\[0\] \(id 9\): 'file_name' '/etc/passwd' leaves the data root"),
        ({"file_name": None}, None, r"images\[0\] \(id 9\): 'file_name' must be a non-empty string, found None"),
        ({"id": "9"}, None, r"images\[0\] \(id 9\): 'id' must be an integer, found '9'"),
        (None, {"caption": None}, r"annotations\[0\] \(id 90\): 'caption' must be a non-empty string, found None"),
        (None, {"caption": "   "}, r"annotations\[0\] \(id 90\): 'caption' must be a non-empty string"),
        (None, {"caption": 17}, r"annotations\[0\] \(id 90\): 'caption' must be a non-empty string, found 17"),
        (None, {"image_id": 9.0}, r"annotations\[0\] \(id 90\): 'image_id' must be an integer, found 9.0"),
    ],
)
def test_coco_records_of_the_wrong_type_or_leaving_the_root_are_named(tmp_path, image, annotation, message):
    with pytest.raises(DatasetFormatError, match=message) as error:
        load_captions(_coco(tmp_path, image, annotation))
    assert "captions_val2014.json" in str(error.value)


def test_a_file_that_is_not_utf8_is_named(tmp_path):
    path = _coco(tmp_path, annotation={"caption": "a cafe"})
    path.write_bytes(path.read_bytes().replace(b"a cafe", b"a caf\xe9"))  # Latin-1, not UTF-8
    with pytest.raises(DatasetFormatError, match=r"captions_val2014.json: not UTF-8 text \(byte \d+\)"):
        load_captions(path)


def test_foil_it_flag_must_be_a_boolean(tmp_path):
    common = {"id": 1, "image_id": 9, "target_word": "dog", "foil_word": "cat"}
    path = tmp_path / "foilv1.0_test_2017.json"
    path.write_text(
        json.dumps(
            {
                "images": [{"id": 9, "file_name": "a.jpg"}],
                "annotations": [
                    {**common, "caption": "a dog", "foil": "no"},
                    {**common, "caption": "a cat", "foil": True},
                ],
            }
        )
    )
    with pytest.raises(
        DatasetFormatError, match=r"foilv1.0_test_2017.json: annotations\[0\] \(id 1\): 'foil' must be true or false"
    ):
        load_foil_it(path)


# --- FOIL-nocaps ---------------------------------------------------------------------------------


def _nocaps_record(**changes):
    record = {
        "image_path": "val/0001.jpg",
        "references": ["a bus", "a red bus"],
        "baseline": "a red bus",
        "foil": "a red boat",
        "replacement": ["bus", "boat"],
        "domain": "near",
    }
    return {**record, **changes}


@pytest.mark.parametrize(
    "record,message",
    [
        (
            _nocaps_record(image_path="../secret/0001.jpg"),
            "record 1: 'image_path' '../secret/0001.jpg' leaves the data root",
        ),
        (_nocaps_record(image_path="/data/0001.jpg"), "record 1: 'image_path' '/data/0001.jpg' leaves the data root"),
        (_nocaps_record(baseline=" "), "record 1: 'baseline' must be a non-empty string"),
        (_nocaps_record(foil=None), "record 1: 'foil' must be a non-empty string, found None"),
        (
            _nocaps_record(references=["a bus", None]),
            r"record 1: 'references\[1\]' must be a non-empty string, found None",
        ),
        (_nocaps_record(references="a bus"), "record 1: 'references' must be a list of captions"),
    ],
)
def test_foil_nocaps_bad_records_are_named(tmp_path, record, message):
    path = tmp_path / "nocaps-val-foil.json"
    path.write_text(json.dumps([_nocaps_record(), record]))
    with pytest.raises(DatasetFormatError, match=f"nocaps-val-foil.json: {message}"):
        load_foil_nocaps(path)


# --- Flickr8k-Expert, Polaris, pickled judgments ---------------------------------------------------


def _flickr(tmp_path, image_path="a.jpg", caption="a dog", rating=3, more=()):
    judgement = {"image_id": "1", "image_path": image_path, "caption": caption, "rating": rating}
    path = tmp_path / "flickr8k.json"
    path.write_text(
        json.dumps(
            {
                "1": {
                    "image_id": "1",
                    "image_path": image_path,
                    "ground_truth": ["a dog runs"],
                    "human_judgement": [judgement, *more],
                }
            }
        )
    )
    return path


@pytest.mark.parametrize(
    "fields,message",
    [
        ({"image_path": "../../a.jpg"}, "image 1: 'image_path' '../../a.jpg' leaves the data root"),
        ({"rating": "4"}, "image 1, judgement 0: 'rating' must be a finite number, found '4'"),
        ({"rating": None}, "image 1, judgement 0: 'rating' must be a finite number, found None"),
        ({"rating": float("inf")}, "image 1, judgement 0: 'rating' must be a finite number, found inf"),
        ({"caption": "  "}, "image 1, judgement 0: 'caption' must be a non-empty string"),
        ({"caption": None}, "image 1, judgement 0: 'caption' must be a non-empty string, found None"),
    ],
)
def test_flickr8k_bad_judgements_are_named(tmp_path, fields, message):
    with pytest.raises(DatasetFormatError, match=f"flickr8k.json: {message}"):
        load_flickr8k_expert(_flickr(tmp_path, **fields))


def _polaris(tmp_path, **changes):
    columns = {
        "refs": [["a dog"], ["a pup"]],
        "cand": ["a cat", "a dog"],
        "img": ["img/1.jpg", "img/2.jpg"],
        "human_score": [0.25, 0.5],
    }
    path = tmp_path / "polaris_test.parquet"
    pl.DataFrame({**columns, **changes}, strict=False).write_parquet(path)
    return path


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"cand": ["a cat", None]}, "row 1: 'caption' must be a non-empty string, found None"),
        ({"cand": ["a cat", " "]}, "row 1: 'caption' must be a non-empty string"),
        ({"human_score": [0.25, float("inf")]}, "row 1: 'human_score' must be a finite number, found inf"),
        ({"human_score": [0.25, float("-inf")]}, "row 1: 'human_score' must be a finite number, found -inf"),
        ({"human_score": ["0.25", "high"]}, "row 0: 'human_score' must be a finite number, found '0.25'"),
        ({"img": ["img/1.jpg", "/abs/2.jpg"]}, "row 1: 'image' '/abs/2.jpg' leaves the data root"),
        ({"img": [None, "img/2.jpg"]}, "row 0: 'image' must be a non-empty string, found None"),
        ({"refs": [["a dog"], [None]]}, r"row 1: 'references\[0\]' must be a non-empty string, found None"),
    ],
)
def test_polaris_bad_rows_are_named(tmp_path, changes, message):
    with pytest.raises(DatasetFormatError, match=f"polaris_test.parquet: {message}"):
        load_polaris(_polaris(tmp_path, **changes))


def test_polaris_csv_whose_refs_are_not_json_is_named(tmp_path):
    path = tmp_path / "polaris.csv"
    path.write_text('refs,cand,img,human_score\n"[""a dog""]",a cat,img/1.jpg,0.5\nnot json,a dog,img/2.jpg,0.5\n')
    with pytest.raises(DatasetFormatError, match="polaris.csv: row 1: 'refs' is not a list of captions"):
        load_polaris(path)


@pytest.mark.parametrize(
    "row,message",
    [
        ({"human_scores": [3.0, float("nan")]}, "row 1: 'human_scores' must be a finite number, found nan"),
        ({"human_scores": []}, "row 1 has no human_scores"),
        ({"candidates": None}, "row 1: 'caption' must be a non-empty string, found (None|nan)"),
        ({"image_path": "../v/2.jpg"}, "row 1: 'image' '../v/2.jpg' leaves the data root"),
        ({"refs": None}, "row 1: 'references' must be a list of captions, found None"),
        ({"refs": ("a dog", "")}, r"row 1: 'references\[1\]' must be a non-empty string"),
    ],
)
def test_pickled_judgments_bad_rows_are_named(tmp_path, row, message):
    path = tmp_path / "composite.pkl"
    good = {"candidates": "a dog", "image_path": "v/1.jpg", "human_scores": [3, 4], "refs": ["a pup"]}
    pd.DataFrame([good, {**good, **row}]).to_pickle(path)
    with pytest.raises(DatasetFormatError, match=f"composite.pkl: {message}"):
        load_pickled_judgments(path, allow_pickle=True)


# --- RichHF-18K TFRecords ----------------------------------------------------------------------------


def _rich_hf(tmp_path, records=None):
    path = tmp_path / "dev.tfrecord"
    write_rich_hf(
        path,
        records
        or [
            {"filename": "u1.png", "prompt_misalignment_label": "1 1 1", "overall_score": 3.0},
            {"filename": "u2.png", "prompt_misalignment_label": "1 0", "overall_score": 4.0},
        ],
    )
    return path


def test_a_flipped_byte_in_a_record_is_caught_by_its_crc(tmp_path):
    """Flipping the label '0' to '1' still parses as a valid Example: only the CRC tells."""
    path = _rich_hf(tmp_path)
    data = bytearray(path.read_bytes())
    where = data.index(b"1 0")
    data[where + 2] = ord("1")
    path.write_bytes(bytes(data))
    with pytest.raises(DatasetFormatError, match=r"dev.tfrecord: record 1: CRC of the data does not match"):
        read_rich_hf(path, PROMPTS)


def test_a_flipped_length_is_caught_by_its_crc(tmp_path):
    path = _rich_hf(tmp_path)
    data = bytearray(path.read_bytes())
    data[0] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(DatasetFormatError, match=r"dev.tfrecord: record 0: CRC of the length does not match"):
        read_rich_hf(path, PROMPTS)


@pytest.mark.parametrize(
    "filename,message",
    [
        ("../u1.png", "'filename' '../u1.png' leaves the data root"),
        ("/tmp/u1.png", "'filename' '/tmp/u1.png' leaves the data root"),
    ],
)
def test_a_rich_hf_filename_leaving_the_image_folder_is_refused(tmp_path, filename, message):
    path = _rich_hf(tmp_path, [{"filename": filename, "prompt_misalignment_label": "1 1 1"}])
    with pytest.raises(DatasetFormatError, match=f"dev.tfrecord: record 0: {message}"):
        read_rich_hf(path, PROMPTS)


@pytest.mark.parametrize("score", [float("nan"), float("inf"), float("-inf")])
def test_a_non_finite_rich_hf_score_is_refused(tmp_path, score):
    path = _rich_hf(tmp_path, [{"filename": "u2.png", "prompt_misalignment_label": "1 1", "misalignment_score": score}])
    with pytest.raises(
        DatasetFormatError, match=r"dev.tfrecord: record 0 \(u2.png\): 'misalignment_score' must be a finite number"
    ):
        read_rich_hf(path, PROMPTS)


def test_a_rich_hf_field_that_is_not_utf8_is_named(tmp_path):
    path = tmp_path / "dev.tfrecord"
    writer = TFRecordWriter(str(path))
    writer.write({"filename": (b"u\xff.png", "byte"), "prompt_misalignment_label": (b"1 1", "byte")})
    writer.close()
    with pytest.raises(DatasetFormatError, match=r"dev.tfrecord: record 0: 'filename' is not UTF-8"):
        read_rich_hf(path, PROMPTS)


def test_an_empty_prompt_is_refused(tmp_path):
    path = _rich_hf(tmp_path, [{"filename": "u2.png", "prompt_misalignment_label": "1 1"}])
    with pytest.raises(
        DatasetFormatError, match=r"dev.tfrecord: record 0 \(u2.png\): 'prompt' must be a non-empty string"
    ):
        read_rich_hf(path, {"u2": "  "})


# --- Dropped rows, by reason, per file ------------------------------------------------------------


def test_dropped_rows_are_counted_by_file_and_reason(tmp_path, caplog):
    rich_hf = _rich_hf(
        tmp_path,
        [
            {"filename": "u1.png", "prompt_misalignment_label": "1 1 1"},
            {"filename": "u2.png", "prompt_misalignment_label": "1 1 1"},
        ],
    )  # u2 has 2 tokens
    nocaps = tmp_path / "nocaps-val-foil.json"
    nocaps.write_text(json.dumps([_nocaps_record(), _nocaps_record(foil="a red sail boat")]))
    rated = {"image_id": "1", "image_path": "a.jpg", "caption": "a cat", "rating": 2}
    flickr = _flickr(tmp_path, rating=float("nan"), more=[rated])
    with caplog.at_level(logging.INFO, logger="condeval"), counting_dropped_rows() as dropped:
        read_rich_hf(rich_hf, PROMPTS)
        load_foil_nocaps(nocaps)
        load_flickr8k_expert(flickr)
    assert dropped.as_dict() == {
        str(flickr): {"unrated judgements (NaN rating)": 1},
        str(rich_hf): {"token and label counts differ": 1},
        str(nocaps): {"token counts differ": 1},
    }
    assert dropped.total() == 3
    assert "1 records kept, 1 dropped (1 token and label counts differ)" in caplog.text
    dropped.write(tmp_path / "dropped.json")
    assert json.loads((tmp_path / "dropped.json").read_text()) == dropped.as_dict()
    load_foil_nocaps(nocaps)  # outside the block: no longer counted
    assert dropped.total() == 3


def test_a_file_read_whole_is_listed_with_nothing_dropped(tmp_path):
    with counting_dropped_rows() as dropped:
        read_rich_hf(_rich_hf(tmp_path), PROMPTS)
    assert dropped.as_dict() == {str(tmp_path / "dev.tfrecord"): {}}


def test_a_pick_a_pic_file_that_is_not_parquet_is_named(tmp_path):
    from condeval.datasets.rich_hf import pick_a_pic_prompts

    (tmp_path / "pap.parquet").write_bytes(b"PAR1 truncated")
    with pytest.raises(DatasetFormatError, match=r"pap.parquet: not a readable Parquet file"):
        pick_a_pic_prompts([tmp_path / "pap.parquet"])


def test_every_judgment_file_read_is_listed_in_the_summary(tmp_path):
    polaris = _polaris(tmp_path)
    with counting_dropped_rows() as dropped:
        load_polaris(polaris)
    assert dropped.as_dict() == {str(polaris): {}}


# --- hostile files: a key given twice, nothing in the file, a refs cell nested past any parser --------


def test_a_json_object_naming_a_key_twice_is_refused_naming_the_file_and_the_key(tmp_path):
    """Python's json keeps the last of two equal keys: a Flickr8k image given twice lost its first
    captions, a COCO file with `images` twice its first list."""
    flickr = tmp_path / "flickr8k.json"
    entry = json.dumps({"image_id": "1", "image_path": "a.jpg", "ground_truth": ["a dog"], "human_judgement": []})
    flickr.write_text('{"1": ' + entry + ', "1": ' + entry + "}")
    with pytest.raises(DatasetFormatError, match=r"flickr8k\.json: the key '1' appears twice"):
        load_flickr8k_expert(flickr)
    coco = _coco(tmp_path)
    text = coco.read_text()
    coco.write_text(text[:-1] + ', "images": []}')
    with pytest.raises(DatasetFormatError, match=r"captions_val2014\.json: the key 'images' appears twice"):
        load_captions(coco)


@pytest.mark.parametrize("kind", ["polaris-header-only", "tfrecord-empty", "flickr-empty", "flickr-all-unrated"])
def test_a_file_that_holds_no_record_is_refused_naming_it(tmp_path, kind):
    if kind == "polaris-header-only":
        path = tmp_path / "polaris.csv"
        path.write_text("refs,cand,img,human_score\n")
        load, what = load_polaris, "judged captions"
    elif kind == "tfrecord-empty":
        path = tmp_path / "dev.tfrecord"
        path.write_bytes(b"")
        load, what = (lambda p: read_rich_hf(p, PROMPTS)), "records"
    else:
        path = _flickr(tmp_path, rating=float("nan")) if kind == "flickr-all-unrated" else tmp_path / "flickr8k.json"
        if kind == "flickr-empty":
            path.write_text("{}")
        load, what = load_flickr8k_expert, "judged captions"
    with pytest.raises(DatasetFormatError, match=rf"{path.name}: no {what} in it"):
        load(path)


@pytest.mark.parametrize("refs", ["[" * 100_000 + "]" * 100_000, "(" * 100_000 + ")" * 100_000, "[1, 2]"])
def test_a_polaris_refs_cell_that_is_no_list_of_captions_is_refused_naming_the_row(tmp_path, refs):
    path = tmp_path / "polaris.csv"
    pl.DataFrame({"refs": [refs], "cand": ["a dog"], "img": ["a.jpg"], "human_score": ["0.5"]}).write_csv(path)
    with pytest.raises(DatasetFormatError, match=r"polaris\.csv: row 0"):
        load_polaris(path)


def test_two_richhf_files_of_one_uid_and_a_null_pick_a_pic_caption_are_refused_naming_the_record(tmp_path):
    """The uid (a file's stem) keys the prompt: `a/u1.png` and `b/u1.png` were both given u1's prompt. A null
    caption was refused later, naming the TFRecord rather than the Parquet row that held it."""
    path = _rich_hf(
        tmp_path,
        [
            {"filename": "a/u1.png", "prompt_misalignment_label": "1 1 1"},
            {"filename": "b/u1.png", "prompt_misalignment_label": "1 1 1"},
        ],
    )
    with pytest.raises(DatasetFormatError, match=r"record 1 \(b/u1\.png\): image uid u1 is also a/u1\.png's"):
        read_rich_hf(path, PROMPTS)
    from condeval.datasets.rich_hf import pick_a_pic_prompts

    pl.DataFrame({"caption": ["a dog", None], "image_0_uid": ["u1", "u2"], "image_1_uid": ["u3", "u4"]}).write_parquet(
        tmp_path / "pap.parquet"
    )
    with pytest.raises(DatasetFormatError, match=r"pap\.parquet: row 1: 'caption' must be a non-empty string"):
        pick_a_pic_prompts([tmp_path / "pap.parquet"])

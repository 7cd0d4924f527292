"""A lab's own copies of the datasets, as real files come: what the loaders read right, and what they
refuse by file and record instead of misreading (the lab trial of 2026-11-29: a partition typo that
emptied the evaluation set, scores lost from whole columns, a foil on another image, references of
another image, captions that depended on file order)."""

import json
import math
import pickle

import numpy as np
import pandas as pd
import polars as pl
import pytest
from PIL import Image
from tfrecord.writer import TFRecordWriter

from condeval.datasets import DatasetFormatError, counting_dropped_rows
from condeval.datasets.celeba import CELEBA_ATTRIBUTES, load_celeba, write_celeba_lists
from condeval.datasets.coco import image_dir, load_captions
from condeval.datasets.foil import load_foil_it, load_foil_nocaps
from condeval.datasets.judgments import load_flickr8k_expert, load_pickled_judgments, load_polaris
from condeval.datasets.rich_hf import pick_a_pic_prompts, read_rich_hf
from condeval.datasets.rxrx1 import METADATA_COLUMNS, held_out_pairs, load_site, read_metadata, write_site

# --- CelebA ----------------------------------------------------------------------------------------


def _celeba(root, n=6):
    images = [f"{k:06d}.jpg" for k in range(1, n + 1)]
    values = np.random.default_rng(0).choice([-1, 1], (n, len(CELEBA_ATTRIBUTES)))
    write_celeba_lists(root, images, values, [k % 3 for k in range(n)])
    (root / "img_align_celeba").mkdir(parents=True, exist_ok=True)
    for image in images:
        (root / "img_align_celeba" / image).write_bytes(b"")
    return images


@pytest.mark.parametrize("partition", ["Val", "validation", "test ", 1])
def test_celeba_partition_outside_the_three_is_refused(tmp_path, partition):
    _celeba(tmp_path)
    with pytest.raises(ValueError, match="partition must be one of"):
        load_celeba(tmp_path, partition=partition)
    assert load_celeba(tmp_path, partition="val").height == 2


@pytest.mark.parametrize("attributes", [("Male", "Male"), "Male", ()])
def test_celeba_attributes_must_be_distinct_names(tmp_path, attributes):
    _celeba(tmp_path)
    with pytest.raises(ValueError, match="attributes must be"):
        load_celeba(tmp_path, attributes=attributes)


def test_celeba_partition_file_with_a_byte_order_mark_is_read(tmp_path):
    _celeba(tmp_path)
    partition_file = tmp_path / "list_eval_partition.txt"
    partition_file.write_bytes(b"\xef\xbb\xbf" + partition_file.read_bytes().replace(b"\n", b"\r\n"))
    assert load_celeba(tmp_path)["partition"].to_list() == ["train", "val", "test"] * 2


def test_celeba_counts_partition_lines_of_unlisted_images(tmp_path):
    _celeba(tmp_path)
    with open(tmp_path / "list_eval_partition.txt", "a") as handle:
        handle.write("999999.jpg 2\n")
    with counting_dropped_rows() as dropped:
        assert load_celeba(tmp_path).height == 6
    assert dropped.as_dict() == {
        str(tmp_path / "list_attr_celeba.txt"): {},
        str(tmp_path / "list_eval_partition.txt"): {"images the attribute file does not list": 1},
    }


def test_a_folder_where_a_file_belongs_is_named(tmp_path):
    _celeba(tmp_path)
    (tmp_path / "list_eval_partition.txt").unlink()
    (tmp_path / "list_eval_partition.txt").mkdir()
    with pytest.raises(DatasetFormatError, match="list_eval_partition.txt: not a readable file"):
        load_celeba(tmp_path)
    (tmp_path / "captions_val2014.json").mkdir()
    with pytest.raises(DatasetFormatError, match="captions_val2014.json: not a readable file"):
        load_captions(tmp_path / "captions_val2014.json")


# --- COCO and FOIL ---------------------------------------------------------------------------------


def _coco_document(images, annotations):
    return {"info": {}, "licenses": [], "images": images, "annotations": annotations}


def test_coco_id_beyond_64_bits_is_named(tmp_path):
    path = tmp_path / "captions_val2014.json"
    image = {"id": 1, "file_name": "a.jpg"}
    path.write_text(json.dumps(_coco_document([image], [{"id": 2**64, "image_id": 1, "caption": "a dog"}])))
    with pytest.raises(DatasetFormatError, match=r"annotations\[0\].*'id' 18446744073709551616 does not fit"):
        load_captions(path)


def test_coco_images_come_from_the_root_a_linked_captions_file_is_listed_under(tmp_path):
    shared = tmp_path / "shared" / "annotations"
    shared.mkdir(parents=True)
    (shared / "captions_val2014.json").write_text("{}")
    mine = tmp_path / "mine" / "annotations"
    mine.mkdir(parents=True)
    (mine / "captions_val2014.json").symlink_to(shared / "captions_val2014.json")
    assert image_dir(mine / "captions_val2014.json") == tmp_path / "mine" / "val2014"


def test_foil_original_and_foil_of_different_images_are_refused(tmp_path):
    images = [{"id": 1, "file_name": "a.jpg"}, {"id": 2, "file_name": "b.jpg"}]
    common = {"id": 9, "target_word": "dog", "foil_word": "cat"}
    annotations = [
        {**common, "image_id": 1, "caption": "a dog runs", "foil": False},
        {**common, "image_id": 2, "caption": "a cat runs", "foil": True},
    ]
    path = tmp_path / "foilv1.0_test_2017.json"
    path.write_text(json.dumps(_coco_document(images, annotations)))
    with pytest.raises(DatasetFormatError, match="annotation id 9: the original is of image 1, its foil of image 2"):
        load_foil_it(path)


def test_foil_nocaps_stores_the_image_path_it_checked(tmp_path):
    record = {
        "image_path": "val/1.jpg\n",
        "references": ["a car"],
        "baseline": "a red car",
        "foil": "a red truck",
        "replacement": ["car", "truck"],
        "domain": "in",
    }
    path = tmp_path / "nocaps-val-foil.json"
    path.write_text(json.dumps([record]))
    (tmp_path / "val").mkdir()
    (tmp_path / "val" / "1.jpg").write_bytes(b"")
    frame = load_foil_nocaps(path, image_root=tmp_path)
    assert frame["image_path"].unique().to_list() == ["val/1.jpg"]
    assert frame["path"][0] == str(tmp_path / "val" / "1.jpg")


# --- RichHF-18K and Pick-a-Pic ---------------------------------------------------------------------


def _tfrecord(path, records):
    writer = TFRecordWriter(str(path))
    for record in records:
        writer.write(record)
    writer.close()
    return path


def _record(filename, labels="1 1 1", **scores):
    return {"filename": (filename.encode(), "byte"), "prompt_misalignment_label": (labels.encode(), "byte"), **scores}


PROMPTS = {"u1": "a red bus", "u2": "a blue car", "u3": "...", "u4": "two green dogs"}


@pytest.mark.parametrize(
    "records,message",
    [
        (
            [
                _record("u1.png", aesthetics_score=(0.5, "float")),
                _record("u2.png", aesthetics_score=(0.5, "float"), overall_score=(0.5, "float")),
            ],
            r"record 1 \(u2.png\): holds scores \['aesthetics_score', 'overall_score'\], the file's first record "
            r"\['aesthetics_score'\]",
        ),
        (
            [_record("u1.png", overall_score=(0.5, "float")), _record("u2.png")],
            r"record 1 \(u2.png\): holds scores \[\], the file's first record \['overall_score'\]",
        ),
        (
            [_record("u1.png", overall_score=(4, "int"))],
            "'overall_score' must be one float, found 1 values in a int64_list",
        ),
        (
            [_record("u1.png", aesthetics_score=([0.25, math.nan], "float"))],
            "'aesthetics_score' must be one float, found 2",
        ),
        ([{**_record("u1.png"), "filename": ([b"u1.png", b"u2.png"], "byte")}], "'filename' holds 2 values, not one"),
        (
            [_record("u1.png"), _record("u1.png", "0 0 0")],
            r"record 1 \(u1.png\): image listed twice \(first in record 0\)",
        ),
        (
            [_record("u1.png", "1 1", overall_score=(math.nan, "float"))],
            r"record 0 \(u1.png\): 'overall_score' must be a finite number",
        ),
    ],
)
def test_rich_hf_scores_and_fields_are_read_whole_or_refused(tmp_path, records, message):
    path = _tfrecord(tmp_path / "test.tfrecord", records)
    with pytest.raises(DatasetFormatError, match=message):
        read_rich_hf(path, PROMPTS)


def test_rich_hf_prompt_without_a_word_is_dropped_and_counted(tmp_path):
    path = _tfrecord(tmp_path / "dev.tfrecord", [_record("u1.png"), _record("u3.png", "")])
    with counting_dropped_rows() as dropped:
        frame = read_rich_hf(path, PROMPTS)
    assert frame["filename"].to_list() == ["u1.png"]
    assert dropped.as_dict() == {str(path): {"prompt has no word": 1}}


def test_pick_a_pic_captions_do_not_depend_on_file_order(tmp_path):
    first, second = tmp_path / "a.parquet", tmp_path / "b.parquet"
    pl.DataFrame(
        {"caption": ["a red cat", "a red cat"], "image_0_uid": ["u1", "u2"], "image_1_uid": ["u2", "u3"]}
    ).write_parquet(first)
    pl.DataFrame({"caption": ["a green frog"], "image_0_uid": ["u4"], "image_1_uid": ["u2"]}).write_parquet(second)
    assert pick_a_pic_prompts([first]) == {"u1": "a red cat", "u2": "a red cat", "u3": "a red cat"}
    for paths in ([first, second], [second, first]):
        with pytest.raises(DatasetFormatError, match=r"row \d: image u2 has caption"):
            pick_a_pic_prompts(paths)
    pl.DataFrame({"caption": ["a dog"], "image_0_uid": [None], "image_1_uid": ["u5"]}).write_parquet(second)
    with pytest.raises(DatasetFormatError, match="b.parquet: row 0: 'image_0_uid' must be a non-empty string"):
        pick_a_pic_prompts([second])


# --- human judgments -------------------------------------------------------------------------------


def _flickr(tmp_path, entries):
    path = tmp_path / "flickr8k.json"
    path.write_text(json.dumps(entries))
    return path


def _entry(image_path, references, judgements):
    return {"image_path": image_path, "ground_truth": references, "human_judgement": judgements}


def test_flickr8k_one_image_under_two_ids_is_refused(tmp_path):
    judged = [{"caption": "a zebra", "rating": 4}]
    path = _flickr(
        tmp_path,
        {
            "1": _entry("img/1.jpg", ["a zebra grazes"], judged),
            "2": _entry("img/1.jpg", ["two boys play soccer"], judged),
        },
    )
    with pytest.raises(DatasetFormatError, match="image 2: image_path 'img/1.jpg' is already image 1's"):
        load_flickr8k_expert(path)


def test_flickr8k_judgement_of_another_image_is_refused(tmp_path):
    judged = [{"image_path": "img/2.jpg", "caption": "a zebra", "rating": 4}]
    path = _flickr(tmp_path, {"1": _entry("img/1.jpg", ["a zebra grazes"], judged)})
    with pytest.raises(DatasetFormatError, match="image 1, judgement 0: image_path 'img/2.jpg' is not its entry's"):
        load_flickr8k_expert(path)
    judged[0]["image_path"] = "img/1.jpg"
    assert load_flickr8k_expert(_flickr(tmp_path, {"1": _entry("img/1.jpg", ["a zebra"], judged)})).height == 1


def test_flickr8k_unrated_judgement_without_a_caption_is_refused(tmp_path):
    path = _flickr(tmp_path, {"1": _entry("img/1.jpg", ["a zebra"], [{"caption": None, "rating": math.nan}])})
    with pytest.raises(DatasetFormatError, match="image 1, judgement 0: 'caption' must be a non-empty string"):
        load_flickr8k_expert(path)


def test_flickr8k_crowdflower_shares_are_not_read_on_the_expert_scale(tmp_path):
    path = _flickr(tmp_path, {"1": _entry("img/1.jpg", ["a zebra"], [{"caption": "a zebra", "rating": 0.6}])})
    with pytest.raises(DatasetFormatError, match="rating 0.6 is outside 1-4"):
        load_flickr8k_expert(path)


def test_polaris_csv_as_labs_write_it(tmp_path):
    scores = [0.0, 1.0] * 60 + [0.5]
    table = pd.DataFrame(
        {"refs": [["a dog", "a pup"]] * 121, "cand": ["a cat"] * 121, "img": ["img/1.jpg"] * 121, "human_score": scores}
    )
    table.to_csv(tmp_path / "polaris.csv", index=False, float_format="%g")  # lists as Python literals, 0/1 as ints
    frame = load_polaris(tmp_path / "polaris.csv")
    assert frame["human_score"].to_list() == scores
    assert frame["references"][0].to_list() == ["a dog", "a pup"]
    pl.DataFrame({column: table[column].tolist() for column in table.columns}).write_parquet(
        tmp_path / "polaris.PARQUET"
    )
    assert load_polaris(tmp_path / "polaris.PARQUET").equals(frame)


@pytest.mark.parametrize(
    "content,message",
    [
        ({"candidates": ["a dog"]}, "holds a dict, not a pandas DataFrame"),
        (b"version https://git-lfs.github.com/spec/v1\n", "not a readable pickle"),
    ],
)
def test_pickled_judgments_that_are_not_the_bundle_are_named(tmp_path, content, message):
    path = tmp_path / "composite.pkl"
    path.write_bytes(content if isinstance(content, bytes) else pickle.dumps(content))
    with pytest.raises(DatasetFormatError, match=f"composite.pkl: {message}"):
        load_pickled_judgments(path, allow_pickle=True)


def test_pickled_scores_held_as_zero_dimensional_arrays_are_read(tmp_path):
    table = pd.DataFrame({"candidates": ["a dog"], "image_path": ["img/1.jpg"], "human_scores": [np.array(3.0)]})
    table.to_pickle(tmp_path / "vicr.pkl")
    assert load_pickled_judgments(tmp_path / "vicr.pkl", allow_pickle=True)["human_score"].to_list() == [3.0]


# --- RxRx1 -----------------------------------------------------------------------------------------

ROW = "HEPG2-01_1_B02_1,HEPG2-01_1_B02,HEPG2,train,HEPG2-01,1,B02,1,treatment,siRNA-1,3"


@pytest.mark.parametrize(
    "row,message",
    [
        (ROW.replace(",train,", ",Train,"), r"line 2 \(site HEPG2-01_1_B02_1\): 'dataset' must be one of"),
        (ROW.replace("HEPG2-01_1_B02_1,", ",", 1), r"line 2 \(site None\): 'site_id' must be a non-empty string"),
    ],
)
def test_rxrx1_dataset_and_site_id_are_checked(tmp_path, row, message):
    (tmp_path / "metadata.csv").write_text(",".join(METADATA_COLUMNS) + "\n" + row + "\n")
    with pytest.raises(DatasetFormatError, match=message):
        read_metadata(tmp_path)


def test_rxrx1_held_out_pairs_come_from_train_sites(tmp_path):
    (tmp_path / "metadata.csv").write_text(",".join(METADATA_COLUMNS) + "\n" + ROW + "\n")
    with counting_dropped_rows() as dropped:
        assert held_out_pairs(read_metadata(tmp_path), 3).height == 1
    assert dropped.as_dict() == {str(tmp_path / "metadata.csv"): {}}


def test_rxrx1_site_rows_built_by_hand_stay_under_the_root(tmp_path):
    row = {"site_id": "s", "experiment": "../../outside", "plate": 1, "well": "B02", "site": 1}
    with pytest.raises(DatasetFormatError, match="site s: 'experiment' '../../outside' leaves the data root"):
        load_site(tmp_path, row)
    with pytest.raises(DatasetFormatError, match="leaves the data root"):
        write_site(tmp_path, row, np.zeros((6, 4, 4), np.uint8))


@pytest.mark.parametrize("damage", ["truncated", "not an image"])
def test_rxrx1_unreadable_channel_names_the_site_and_file(tmp_path, damage):
    row = {"site_id": "s", "experiment": "HEPG2-01", "plate": 1, "well": "B02", "site": 1}
    paths = write_site(tmp_path, row, np.random.default_rng(0).integers(0, 256, (6, 64, 64), dtype=np.uint8))
    data = paths[4].read_bytes()
    paths[4].write_bytes(data[: int(len(data) * 0.7)] if damage == "truncated" else b"<html>404</html>")
    with pytest.raises(DatasetFormatError, match="site s: .*B02_s1_w5.png is not a readable image"):
        load_site(tmp_path, row)
    assert Image.open(paths[0]).mode == "L"

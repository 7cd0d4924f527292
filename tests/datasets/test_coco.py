"""The COCO captions loader on fixture files in the real format, and every error it must name."""

import json

import pytest

from condeval.datasets import DatasetFormatError
from condeval.datasets.coco import evaluation_pairs, load_captions


def _document():
    images = [
        {
            "id": 42,
            "width": 64,
            "height": 64,
            "file_name": "COCO_val2014_000000000042.jpg",
            "license": 1,
            "flickr_url": "",
            "coco_url": "",
            "date_captured": "2013-11-14 16:28:13",
        },
        {
            "id": 7,
            "width": 64,
            "height": 64,
            "file_name": "COCO_val2014_000000000007.jpg",
            "license": 1,
            "flickr_url": "",
            "coco_url": "",
            "date_captured": "2013-11-14 16:28:13",
        },
    ]
    annotations = [
        {"id": 903, "image_id": 42, "caption": "A red circle left of a blue square. "},
        {"id": 901, "image_id": 42, "caption": "Two shapes on a noisy background."},
        {"id": 12, "image_id": 7, "caption": "A small green triangle."},
    ]
    return {"info": {"year": 2014}, "images": images, "licenses": [{"id": 1, "name": "x"}], "annotations": annotations}


def _write(tmp_path, document, touch_images=True):
    path = tmp_path / "annotations" / "captions_val2014.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))
    if touch_images:
        (tmp_path / "val2014").mkdir(exist_ok=True)
        for image in document.get("images", []):
            (tmp_path / "val2014" / image["file_name"]).write_bytes(b"\xff\xd8\xff")
    return path


def test_reads_the_real_layout_sorted_with_paths(tmp_path):
    path = _write(tmp_path, _document())
    frame = load_captions(path, tmp_path / "val2014")
    assert frame.columns == ["image_id", "caption_id", "file_name", "caption", "path"]
    assert frame["caption_id"].to_list() == [12, 901, 903]
    assert frame["caption"][2] == "A red circle left of a blue square."
    assert frame["path"][0].endswith("val2014/COCO_val2014_000000000007.jpg")
    assert "path" not in load_captions(path).columns


def test_evaluation_pairs_take_the_smallest_annotation_id_per_image(tmp_path):
    pairs = evaluation_pairs(load_captions(_write(tmp_path, _document())))
    assert pairs["image_id"].to_list() == [7, 42] and pairs["caption_id"].to_list() == [12, 901]


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d["annotations"][1].pop("caption"), r"annotations\[1\] \(id 901\) lacks field 'caption'"),
        (lambda d: d["images"][0].pop("file_name"), r"images\[0\] \(id 42\) lacks field 'file_name'"),
        (lambda d: d.pop("annotations"), r"top-level field 'annotations' is missing"),
        (
            lambda d: d["annotations"].append({"id": 12, "image_id": 42, "caption": "again"}),
            r"duplicate annotation id 12",
        ),
        (lambda d: d["images"].append(dict(d["images"][1])), r"duplicate image id 7"),
        (
            lambda d: d["annotations"].append({"id": 5, "image_id": 99, "caption": "x"}),
            r"annotation 5 refers to image 99, which is not listed",
        ),
    ],
)
def test_malformed_files_name_the_file_and_the_record(tmp_path, mutate, message):
    document = _document()
    mutate(document)
    path = _write(tmp_path, document, touch_images=False)
    with pytest.raises(DatasetFormatError, match=r"captions_val2014\.json: " + message):
        load_captions(path)


def test_a_listed_image_without_its_file_is_named(tmp_path):
    path = _write(tmp_path, _document())
    (tmp_path / "val2014" / "COCO_val2014_000000000042.jpg").unlink()
    with pytest.raises(DatasetFormatError, match=r"image 42 is listed but .*COCO_val2014_000000000042\.jpg is missing"):
        load_captions(path, tmp_path / "val2014")


def test_unreadable_and_absent_files(tmp_path):
    bad = tmp_path / "captions_val2014.json"
    bad.write_text("{not json")
    with pytest.raises(DatasetFormatError, match="not valid JSON"):
        load_captions(bad)
    with pytest.raises(DatasetFormatError, match="file not found"):
        load_captions(tmp_path / "absent.json")
    assert issubclass(DatasetFormatError, ValueError)


def test_the_dataset_folders_follow_from_a_captions_file(tmp_path):
    from condeval.datasets.coco import coco_root, image_dir

    path = _write(tmp_path, _document())
    assert coco_root(path) == tmp_path.resolve()
    assert image_dir(path) == tmp_path.resolve() / "val2014"

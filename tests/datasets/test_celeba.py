"""CelebA's two list files, in their real format: a round trip, the file as CelebA ships it (runs of
spaces, a trailing space after the header), the support regimes, and every malformed case named."""

from pathlib import Path

import numpy as np
import pytest

from condeval.datasets import DatasetFormatError
from condeval.datasets.celeba import (
    ATTRIBUTES,
    CELEBA_ATTRIBUTES,
    all_conditions,
    load_celeba,
    read_attribute_file,
    support,
    write_celeba_lists,
)

#: The head of the real list_attr_celeba.txt (its first image's line, as released).
REAL_HEAD = (
    "202599\n"
    + " ".join(CELEBA_ATTRIBUTES)
    + " \n"
    + "000001.jpg -1  1  1 -1 -1 -1 -1 -1 -1 -1 -1  1 -1 -1 -1 -1 -1 -1  1  1 -1  1 -1 -1  1 -1 -1  1 -1 -1 -1  1  1 -1"
    "  1 -1  1 -1 -1  1\n"
)


def _world(root: Path, n: int = 6, seed: int = 0):
    rng = np.random.default_rng(seed)
    images = [f"{k:06d}.jpg" for k in range(1, n + 1)]
    values = rng.choice([-1, 1], (n, len(CELEBA_ATTRIBUTES)))
    partitions = [k % 3 for k in range(n)]
    write_celeba_lists(root, images, values, partitions)
    (root / "img_align_celeba").mkdir(parents=True, exist_ok=True)
    for image in images:
        (root / "img_align_celeba" / image).write_bytes(b"")
    return images, values, partitions


def test_the_lists_round_trip(tmp_path):
    images, values, partitions = _world(tmp_path)
    frame = load_celeba(tmp_path)
    assert frame["image"].to_list() == images
    for name in ATTRIBUTES:
        k = CELEBA_ATTRIBUTES.index(name)
        assert frame[name].to_list() == ((values[:, k] + 1) // 2).tolist()
    assert frame["partition"].to_list() == [["train", "val", "test"][p] for p in partitions]
    assert load_celeba(tmp_path, partition="val")["image"].to_list() == images[1::3]
    assert all(Path(p).is_file() for p in frame["path"])


def test_the_released_layout_parses(tmp_path):
    path = tmp_path / "list_attr_celeba.txt"
    path.write_text(REAL_HEAD.replace("202599", "1"))
    table = read_attribute_file(path)
    assert table.columns == ["image", *CELEBA_ATTRIBUTES]
    assert table.row(0)[:4] == ("000001.jpg", -1, 1, 1) and table["Young"][0] == 1


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda lines: ["x"] + lines[1:], "line 1: the image count must be an integer"),
        (lambda lines: ["7"] + lines[1:], "line 1 announces 7 images, the file lists 6"),
        (lambda lines: lines[:2] + [lines[2].rsplit(" ", 1)[0]] + lines[3:], "line 3: 39 values for 40 attributes"),
        (
            lambda lines: lines[:3] + [lines[3].replace(" 1", " 0", 1).replace("-1", " 0", 1)] + lines[4:],
            "line 4: attribute '.*' must be 1 or -1, found '0'",
        ),
        (lambda lines: lines[:3] + [lines[2]] + lines[4:], "line 4: image '000001.jpg' listed twice"),
        (
            lambda lines: lines[:2] + ["../escape.jpg" + lines[2][10:]] + lines[3:],
            "line 3: 'image' '../escape.jpg' leaves",
        ),
    ],
)
def test_a_malformed_attribute_file_names_the_line(tmp_path, edit, message):
    _world(tmp_path)
    path = tmp_path / "list_attr_celeba.txt"
    path.write_text("\n".join(edit(path.read_text().splitlines())) + "\n")
    with pytest.raises(DatasetFormatError, match=message):
        load_celeba(tmp_path)


def test_partitions_attributes_and_images_are_checked(tmp_path):
    _world(tmp_path)
    partition = tmp_path / "list_eval_partition.txt"
    partition.write_text(partition.read_text().replace("000002.jpg 1", "000002.jpg 5"))
    with pytest.raises(DatasetFormatError, match="line 2: expected '<image> <0\\|1\\|2>'"):
        load_celeba(tmp_path)
    _world(tmp_path)
    partition.write_text("".join(partition.read_text().splitlines(keepends=True)[:-1]))
    with pytest.raises(DatasetFormatError, match="no partition for image '000006.jpg'"):
        load_celeba(tmp_path)
    _world(tmp_path)
    with pytest.raises(DatasetFormatError, match="no attribute 'Wings'"):
        load_celeba(tmp_path, attributes=("Male", "Wings"))
    (tmp_path / "img_align_celeba/000003.jpg").unlink()
    with pytest.raises(DatasetFormatError, match="000003.jpg is missing"):
        load_celeba(tmp_path)


def test_the_held_out_regime_keeps_the_reference_and_the_single_attribute_conditions():
    conditions = all_conditions()
    assert conditions.shape == (16, 4) and len({tuple(c) for c in conditions}) == 16
    kept = conditions[support(conditions, "held_out")]
    assert sorted(map(tuple, kept)) == [(0, 0, 0, 0), (0, 0, 0, 1), (0, 0, 1, 0), (0, 1, 0, 0), (1, 0, 0, 0)]
    assert support(conditions, "full").all()
    with pytest.raises(ValueError, match="regime"):
        support(conditions, "partial")

"""CelebA (aligned faces), read as released: ``list_attr_celeba.txt``, ``list_eval_partition.txt``
and ``img_align_celeba/``.

- ``list_attr_celeba.txt``: a count line, a line of the 40 attribute names, then one line per image,
  ``000001.jpg`` and 40 values in {−1, 1}, separated by runs of spaces.
- ``list_eval_partition.txt``: ``000001.jpg 0`` per image, 0/1/2 = train/val/test.

The trust-score paper conditions on four attributes (:data:`ATTRIBUTES`); a value is 1 when the
attribute is present and 0 when absent. Its two support regimes (:func:`support`): **held-out**, where
training sees only the all-absent reference and the four single-attribute conditions (5 of the 16),
and **full**.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import numpy as np
import polars as pl

from condeval.datasets import DatasetFormatError, read_text, relative_path, report_rows

__all__ = [
    "ATTRIBUTES",
    "PARTITIONS",
    "REGIMES",
    "CELEBA_ATTRIBUTES",
    "read_attribute_file",
    "write_celeba_lists",
    "read_partition_file",
    "load_celeba",
    "support",
    "all_conditions",
]

#: The 40 attribute names of ``list_attr_celeba.txt``, in the file's order.
CELEBA_ATTRIBUTES = (
    "5_o_Clock_Shadow",
    "Arched_Eyebrows",
    "Attractive",
    "Bags_Under_Eyes",
    "Bald",
    "Bangs",
    "Big_Lips",
    "Big_Nose",
    "Black_Hair",
    "Blond_Hair",
    "Blurry",
    "Brown_Hair",
    "Bushy_Eyebrows",
    "Chubby",
    "Double_Chin",
    "Eyeglasses",
    "Goatee",
    "Gray_Hair",
    "Heavy_Makeup",
    "High_Cheekbones",
    "Male",
    "Mouth_Slightly_Open",
    "Mustache",
    "Narrow_Eyes",
    "No_Beard",
    "Oval_Face",
    "Pale_Skin",
    "Pointy_Nose",
    "Receding_Hairline",
    "Rosy_Cheeks",
    "Sideburns",
    "Smiling",
    "Straight_Hair",
    "Wavy_Hair",
    "Wearing_Earrings",
    "Wearing_Hat",
    "Wearing_Lipstick",
    "Wearing_Necklace",
    "Wearing_Necktie",
    "Young",
)

#: The attributes the trust-score paper conditions CelebA on, in its order.
ATTRIBUTES = ("Male", "Smiling", "Blond_Hair", "Eyeglasses")

#: ``list_eval_partition.txt`` codes.
PARTITIONS = {0: "train", 1: "val", 2: "test"}

#: Support regimes: which conditions training may see.
REGIMES = ("held_out", "full")

ATTRIBUTE_FILE = "list_attr_celeba.txt"
PARTITION_FILE = "list_eval_partition.txt"
IMAGE_FOLDER = "img_align_celeba"


def _lines(path: Path) -> list[str]:
    return read_text(path).splitlines()


def read_attribute_file(path: str | os.PathLike) -> pl.DataFrame:
    """``list_attr_celeba.txt`` as a table: ``image`` and one Int8 column per attribute, values −1/1.

    Raises
    ------
    DatasetFormatError
        Naming the file and the line: a count line that is not an integer or disagrees with the
        number of image lines, a header of repeated names, a line with the wrong number of values, a
        value outside {−1, 1}, a duplicate image, or an image name that leaves the data root.
    """
    path = Path(path)
    lines = _lines(path)
    if len(lines) < 2:
        raise DatasetFormatError(f"{path}: needs a count line and a header line")
    try:
        count = int(lines[0].strip())
    except ValueError:
        raise DatasetFormatError(f"{path}: line 1: the image count must be an integer, found {lines[0]!r}") from None
    names = lines[1].split()
    if not names or len(set(names)) != len(names):
        raise DatasetFormatError(f"{path}: line 2: the header must list distinct attribute names")
    images, values, seen = [], [], set()
    for number, line in enumerate(lines[2:], start=3):
        fields = line.split()
        if not fields:
            continue
        where = f"{path}: line {number}"
        if len(fields) != len(names) + 1:
            raise DatasetFormatError(f"{where}: {len(fields) - 1} values for {len(names)} attributes")
        image = relative_path(fields[0], where, "image")
        if image in seen:
            raise DatasetFormatError(f"{where}: image {image!r} listed twice")
        row = [_attribute_value(v, where, name) for v, name in zip(fields[1:], names, strict=True)]
        seen.add(image)
        images.append(image)
        values.append(row)
    if len(images) != count:
        raise DatasetFormatError(f"{path}: line 1 announces {count} images, the file lists {len(images)}")
    table = np.array(values, dtype=np.int8).reshape(len(images), len(names))
    return pl.DataFrame({"image": images} | {name: table[:, k] for k, name in enumerate(names)})


def _attribute_value(text: str, where: str, name: str) -> int:
    if text not in ("1", "-1"):
        raise DatasetFormatError(f"{where}: attribute {name!r} must be 1 or -1, found {text!r}")
    return int(text)


def read_partition_file(path: str | os.PathLike) -> pl.DataFrame:
    """``list_eval_partition.txt`` as ``image``, ``partition`` (``train``/``val``/``test``)."""
    path = Path(path)
    images, partitions = [], []
    for number, line in enumerate(_lines(path), start=1):
        fields = line.split()
        if not fields:
            continue
        where = f"{path}: line {number}"
        if len(fields) != 2 or fields[1] not in ("0", "1", "2"):
            raise DatasetFormatError(f"{where}: expected '<image> <0|1|2>', found {line!r}")
        images.append(relative_path(fields[0], where, "image"))
        partitions.append(PARTITIONS[int(fields[1])])
    frame = pl.DataFrame({"image": images, "partition": partitions})
    duplicated = frame.filter(pl.col("image").is_duplicated())
    if duplicated.height:
        raise DatasetFormatError(f"{path}: image {duplicated['image'][0]!r} listed twice")
    return frame


def load_celeba(root: str | os.PathLike, attributes=ATTRIBUTES, partition: str | None = None) -> pl.DataFrame:
    """CelebA's images with their partition and the chosen attributes as 0/1.

    Parameters
    ----------
    root : path-like
        The dataset folder holding the two text files and ``img_align_celeba/``.
    attributes : sequence of str
        Attribute names (default the paper's four).
    partition : {"train", "val", "test"}, optional
        Keep one partition.

    Returns
    -------
    polars.DataFrame
        ``image``, ``path``, ``partition`` and one UInt8 column (0/1) per attribute, in file order.

    Raises
    ------
    DatasetFormatError
        Naming the file: a malformed line (above), an unknown attribute, an image without a
        partition, or a listed image file that is missing.
    ValueError
        ``attributes`` not distinct names, or a ``partition`` other than train, val or test.

    Notes
    -----
    Partition lines of images the attribute file does not list are dropped and counted
    (:func:`condeval.datasets.counting_dropped_rows`).
    """
    root = Path(root)
    attributes = _attribute_names(attributes)
    if partition is not None and partition not in PARTITIONS.values():
        raise ValueError(f"partition must be one of {list(PARTITIONS.values())} or None; got {partition!r}")
    table = read_attribute_file(root / ATTRIBUTE_FILE)
    unknown = [a for a in attributes if a not in table.columns]
    if unknown:
        raise DatasetFormatError(f"{root / ATTRIBUTE_FILE}: no attribute {unknown[0]!r} in its header")
    frame = table.select("image", *[((pl.col(a) + 1) // 2).cast(pl.UInt8).alias(a) for a in attributes])
    partitions = read_partition_file(root / PARTITION_FILE)
    frame = frame.join(partitions, on="image", how="left", maintain_order="left")
    unpartitioned = frame.filter(pl.col("partition").is_null())
    if unpartitioned.height:
        raise DatasetFormatError(f"{root / PARTITION_FILE}: no partition for image {unpartitioned['image'][0]!r}")
    report_rows(
        root / PARTITION_FILE,
        frame.height,
        {"images the attribute file does not list": partitions.height - frame.height},
        "images",
    )
    report_rows(root / ATTRIBUTE_FILE, frame.height, {}, "images")
    if partition is not None:
        frame = frame.filter(pl.col("partition") == partition)
    paths = [str(root / IMAGE_FOLDER / image) for image in frame["image"]]
    missing = next((p for p in paths if not os.path.isfile(p)), None)
    if missing is not None:
        raise DatasetFormatError(f"{root / ATTRIBUTE_FILE}: listed image {missing} is missing")
    return frame.with_columns(pl.Series("path", paths)).select("image", "path", "partition", *attributes)


def _attribute_names(attributes) -> list[str]:
    """``attributes`` as a list of distinct names (one str is refused: it would be read letter by letter)."""
    if isinstance(attributes, str):
        raise ValueError(f"attributes must be a sequence of names, not one str: [{attributes!r}]")
    names = list(attributes)
    if not names or not all(isinstance(name, str) for name in names) or len(set(names)) != len(names):
        raise ValueError(f"attributes must be distinct attribute names; got {names!r}")
    return names


def write_celeba_lists(root: str | os.PathLike, images: list[str], values: np.ndarray, partitions: list[int]) -> None:
    """Write ``list_attr_celeba.txt`` and ``list_eval_partition.txt`` into ``root`` as CelebA ships them
    (values (N, 40) in {−1, 1}, in :data:`CELEBA_ATTRIBUTES` order; partitions 0/1/2), atomically."""
    from condeval.core.io import atomic_path

    values = np.asarray(values)
    if values.shape != (len(images), len(CELEBA_ATTRIBUTES)) or not np.isin(values, (-1, 1)).all():
        raise ValueError(f"values must be (N, 40) in {{-1, 1}}; got shape {values.shape}")
    lines = [str(len(images)), " ".join(CELEBA_ATTRIBUTES) + " "]
    lines += [image + "".join(f"{v:>3d}" for v in row) for image, row in zip(images, values.tolist(), strict=True)]
    with atomic_path(Path(root) / ATTRIBUTE_FILE) as tmp:
        Path(tmp).write_text("\n".join(lines) + "\n")
    with atomic_path(Path(root) / PARTITION_FILE) as tmp:
        Path(tmp).write_text("".join(f"{image} {int(p)}\n" for image, p in zip(images, partitions, strict=True)))


def all_conditions(n_attributes: int = len(ATTRIBUTES)) -> np.ndarray:
    """Every 0/1 tuple of ``n_attributes`` attributes, (2**n, n), in binary order (0000, 0001, …)."""
    return np.array(list(itertools.product((0, 1), repeat=n_attributes)), dtype=np.uint8)


def support(attributes: np.ndarray, regime: str) -> np.ndarray:
    """Which rows of ``attributes`` (N, K) of 0/1 a regime trains on: ``"full"`` every row,
    ``"held_out"`` the all-absent reference and the single-attribute conditions (at most one 1)."""
    attributes = np.asarray(attributes)
    if regime not in REGIMES:
        raise ValueError(f"regime must be one of {REGIMES}; got {regime!r}")
    if regime == "full":
        return np.ones(len(attributes), dtype=bool)
    return attributes.sum(axis=1) <= 1

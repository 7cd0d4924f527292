"""FOIL-it (``foilv1.0_{train,test}_2017.json``) and FOIL-nocaps (``nocaps-val-foil.json``).

Both become word-labelled captions: one row per caption with its ``words`` and per-word
``labels`` (1 = the word is an error), ``foil`` telling a foiled caption from its original.

FOIL-it is prepared as the CLIPScore risk-control code prepares it: captions lowercased, every
character outside ``[\\w\\s]`` removed, split on white space; original and foil are paired by
``id``; a pair whose token counts differ is dropped (and counted in the log); the error is the
first position where the two differ.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import polars as pl

from condeval.datasets import DatasetFormatError, read_json, relative_path, report_rows, text_field
from condeval.datasets.coco import read_coco_json, with_image_paths

__all__ = ["normalize_caption", "load_foil_it", "load_foil_nocaps", "NOCAPS_DOMAINS"]

_FOIL_FIELDS = ("id", "image_id", "caption", "foil", "target_word", "foil_word")
_NOCAPS_FIELDS = ("image_path", "references", "baseline", "foil", "replacement", "domain")
NOCAPS_DOMAINS = ("in", "near", "out")
_NOT_WORD = re.compile(r"[^\w\s]")
_COUNTS_DIFFER = "token counts differ"

WORD_CAPTION_SCHEMA = {
    "pair_id": pl.Int64,
    "image_id": pl.Int64,
    "file_name": pl.String,
    "caption": pl.String,
    "foil": pl.Boolean,
    "words": pl.List(pl.String),
    "labels": pl.List(pl.Int8),
}


def normalize_caption(caption: str) -> list[str]:
    """Lowercase, drop every character outside ``[\\w\\s]``, split on white space."""
    return _NOT_WORD.sub("", caption.lower()).split()


def _labelled_pair(original: str, foiled: str, where: str) -> tuple[list[str], list[str], int] | None:
    """Both captions' words and the error (the first differing position); None if counts differ."""
    original_words, foiled_words = normalize_caption(original), normalize_caption(foiled)
    if len(original_words) != len(foiled_words):
        return None
    error = next((i for i, (a, b) in enumerate(zip(original_words, foiled_words)) if a != b), None)
    if error is None:
        raise DatasetFormatError(f"{where}: the foil caption equals the original")
    return original_words, foiled_words, error


def load_foil_it(annotations_json: str | os.PathLike, image_dir: str | os.PathLike | None = None) -> pl.DataFrame:
    """Every kept FOIL-it pair as two word-labelled captions (the original, then its foil).

    Parameters
    ----------
    annotations_json : path-like
        ``foilv1.0_{train,test}_2017.json`` (COCO layout; annotations carry ``id``, ``image_id``,
        ``caption``, ``foil``, ``target_word``, ``foil_word``).
    image_dir : path-like, optional
        The COCO image folder; when given every listed image must exist and ``path`` is added.

    Returns
    -------
    polars.DataFrame
        ``pair_id``, ``image_id``, ``file_name``, ``caption``, ``foil``, ``words``, ``labels``,
        ``target_word``, ``foil_word`` (and ``path``), sorted by ``pair_id`` then ``foil``. An
        original's labels are all 0; a foil's are 1 at the first word that differs.

    Raises
    ------
    DatasetFormatError
        Naming the file and the record: a missing field, a duplicate (id, foil), an id without
        both an original and a foil, an original and a foil of different images, or a foil identical
        to its original.
    """
    path = Path(annotations_json)
    file_names, annotations = read_coco_json(path, _FOIL_FIELDS, annotation_key=lambda a: (a["id"], bool(a["foil"])))
    by_pair: dict[int, dict[bool, dict]] = {}
    for annotation in annotations:
        by_pair.setdefault(annotation["id"], {})[bool(annotation["foil"])] = annotation
    rows, dropped = [], 0
    for pair_id in sorted(by_pair):
        pair = by_pair[pair_id]
        if set(pair) != {False, True}:
            raise DatasetFormatError(
                f"{path}: annotation id {pair_id} has no {'foil' if False in pair else 'original'} caption"
            )
        if pair[False]["image_id"] != pair[True]["image_id"]:
            raise DatasetFormatError(
                f"{path}: annotation id {pair_id}: the original is of image {pair[False]['image_id']}, "
                f"its foil of image {pair[True]['image_id']}"
            )
        labelled = _labelled_pair(pair[False]["caption"], pair[True]["caption"], f"{path}: annotation id {pair_id}")
        if labelled is None:
            dropped += 1
            continue
        original, foiled, error = labelled
        for is_foil, words in ((False, original), (True, foiled)):
            record = pair[is_foil]
            rows.append(
                {
                    "pair_id": pair_id,
                    "image_id": record["image_id"],
                    "file_name": file_names[record["image_id"]],
                    "caption": record["caption"].strip(),
                    "foil": is_foil,
                    "words": words,
                    "labels": [int(is_foil and i == error) for i in range(len(words))],
                    "target_word": record["target_word"],
                    "foil_word": record["foil_word"],
                }
            )
    report_rows(path, len(rows) // 2, {_COUNTS_DIFFER: dropped}, "pairs")
    schema = {**WORD_CAPTION_SCHEMA, "target_word": pl.String, "foil_word": pl.String}
    frame = pl.DataFrame(rows, schema=schema)
    return with_image_paths(frame, file_names, image_dir, path) if image_dir is not None else frame


def _check_nocaps_record(record: object, where: str) -> str:
    """A FOIL-nocaps record's image path (stripped); raises naming ``where`` unless the record has every
    field, each of its type."""
    missing = [f for f in _NOCAPS_FIELDS if not isinstance(record, dict) or f not in record]
    if missing:
        raise DatasetFormatError(f"{where} lacks field '{missing[0]}'")
    if record["domain"] not in NOCAPS_DOMAINS:
        raise DatasetFormatError(f"{where} has domain {record['domain']!r}, not one of {NOCAPS_DOMAINS}")
    replacement = record["replacement"]
    if not (isinstance(replacement, list) and len(replacement) == 2 and all(isinstance(w, str) for w in replacement)):
        raise DatasetFormatError(f"{where}: 'replacement' must be [original word, foil word]")
    if not isinstance(record["references"], list):
        raise DatasetFormatError(f"{where}: 'references' must be a list of captions, found {record['references']!r}")
    for number, reference in enumerate(record["references"]):
        text_field(reference, where, f"references[{number}]")
    text_field(record["baseline"], where, "baseline")
    text_field(record["foil"], where, "foil")
    return relative_path(record["image_path"], where, "image_path")


def load_foil_nocaps(path: str | os.PathLike, image_root: str | os.PathLike | None = None) -> pl.DataFrame:
    """FOIL-nocaps as word-labelled captions: each record's ``baseline`` and its ``foil``.

    Parameters
    ----------
    path : path-like
        The JSON list of records with ``image_path``, ``references``, ``baseline``, ``foil``,
        ``replacement`` = [original word, foil word] and ``domain`` (in, near or out).
    image_root : path-like, optional
        Folder that ``image_path`` is relative to; when given, every image must exist and
        ``path`` is added.

    Returns
    -------
    polars.DataFrame
        ``pair_id`` (the record's index), ``image_path``, ``domain``, ``caption``, ``foil``,
        ``words``, ``labels`` (the foil's error is the first word that differs from the baseline;
        a pair whose token counts differ is dropped and counted in the log), ``references``.
    """
    path = Path(path)
    records = read_json(path, list)
    rows, dropped = [], 0
    for index, record in enumerate(records):
        image_path = _check_nocaps_record(record, f"{path}: record {index}")
        labelled = _labelled_pair(record["baseline"], record["foil"], f"{path}: record {index}")
        if labelled is None:
            dropped += 1
            continue
        original, foiled, error = labelled
        for is_foil, words, caption in ((False, original, record["baseline"]), (True, foiled, record["foil"])):
            rows.append(
                {
                    "pair_id": index,
                    "image_path": image_path,
                    "domain": record["domain"],
                    "caption": caption.strip(),
                    "foil": is_foil,
                    "words": words,
                    "labels": [int(is_foil and i == error) for i in range(len(words))],
                    "references": [reference.strip() for reference in record["references"]],
                }
            )
    report_rows(path, len(rows) // 2, {_COUNTS_DIFFER: dropped}, "pairs")
    schema = {
        "pair_id": pl.Int64,
        "image_path": pl.String,
        "domain": pl.String,
        "caption": pl.String,
        "foil": pl.Boolean,
        "words": pl.List(pl.String),
        "labels": pl.List(pl.Int8),
        "references": pl.List(pl.String),
    }
    frame = pl.DataFrame(rows, schema=schema)
    if image_root is not None:
        root = Path(image_root)
        absent = next((p for p in frame["image_path"].unique().sort() if not (root / p).is_file()), None)
        if absent is not None:
            raise DatasetFormatError(f"{path}: image {root / absent} is missing")
        frame = frame.with_columns((pl.lit(str(root) + os.sep) + pl.col("image_path")).alias("path"))
    return frame

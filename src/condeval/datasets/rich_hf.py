"""RichHF-18K (``{train,dev,test}.tfrecord``), read without TensorFlow.

Each record is a ``tf.train.Example`` with ``filename`` (a Pick-a-Pic v1 image) and
``prompt_misalignment_label`` (space-separated ints, one per prompt token, 0 = misaligned), plus
float scores. The prompts are not in the file: they are joined from Pick-a-Pic v1 by image uid
(the filename without its extension). Prompt tokens are split as the dataset's own script splits
them (on ``,.?!":;`` and space, empty tokens dropped); a record whose token count differs from its
label count is dropped and counted in the log.

Every record's two checksums (the masked CRC-32C of its length and of its payload, TFRecord's
framing) are verified with the ``tfrecord`` package's own ``masked_crc``: a flipped byte stops the
read naming the record, instead of silently changing a label.
"""

from __future__ import annotations

import math
import os
import re
import struct
from collections.abc import Iterable, Mapping
from pathlib import Path

import polars as pl

from condeval.core.io import atomic_path
from condeval.datasets import DatasetFormatError, relative_path, report_rows, text_field

__all__ = ["split_prompt", "read_rich_hf", "write_rich_hf", "pick_a_pic_prompts", "SCORES"]

SCORES = ("aesthetics_score", "artifact_score", "misalignment_score", "overall_score")
_DELIMITERS = re.compile("|".join(map(re.escape, ',.?!":; ')))


def split_prompt(prompt: str) -> list[str]:
    """Prompt tokens as RichHF-18K labels them: split on ``,.?!":;`` and space, empties dropped."""
    return [token for token in _DELIMITERS.split(prompt) if token]


def _framed_records(handle, path: Path) -> Iterable[bytes]:
    """The payload of each TFRecord frame (length, CRC of length, payload, CRC of payload), CRCs checked."""
    from tfrecord.writer import TFRecordWriter

    index = 0
    while header := handle.read(12):
        if len(header) < 12:
            raise DatasetFormatError(f"{path}: record {index} is truncated (incomplete length header)")
        length_bytes, length_crc = header[:8], header[8:]
        if TFRecordWriter.masked_crc(length_bytes) != length_crc:
            raise DatasetFormatError(f"{path}: record {index}: CRC of the length does not match (corrupted file)")
        (length,) = struct.unpack("<Q", length_bytes)
        payload, payload_crc = handle.read(length), handle.read(4)
        if len(payload) < length or len(payload_crc) < 4:
            raise DatasetFormatError(f"{path}: record {index} is truncated ({len(payload)} of {length} bytes)")
        if TFRecordWriter.masked_crc(payload) != payload_crc:
            raise DatasetFormatError(f"{path}: record {index}: CRC of the data does not match (corrupted file)")
        yield payload
        index += 1


def _examples(path: Path) -> Iterable[tuple[int, dict]]:
    from google.protobuf.message import DecodeError
    from tfrecord import example_pb2

    if not path.is_file():
        raise DatasetFormatError(f"{path}: file not found")
    with open(path, "rb") as handle:
        for index, payload in enumerate(_framed_records(handle, path)):
            example = example_pb2.Example()
            try:
                example.ParseFromString(payload)
            except DecodeError as error:
                raise DatasetFormatError(f"{path}: record {index} is not a tf.train.Example ({error})") from None
            yield index, example.features.feature


def _bytes(features, key: str, path: Path, index: int) -> str:
    if key not in features or not features[key].bytes_list.value:
        raise DatasetFormatError(f"{path}: record {index} lacks field '{key}' (one bytes value)")
    values = features[key].bytes_list.value
    if len(values) != 1:
        raise DatasetFormatError(f"{path}: record {index}: '{key}' holds {len(values)} values, not one")
    try:
        return values[0].decode("utf-8")
    except UnicodeDecodeError as error:
        raise DatasetFormatError(f"{path}: record {index}: '{key}' is not UTF-8 (byte {error.start})") from None


def _scores(features, where: str) -> dict[str, float]:
    """The scores a record holds, each one finite float (an int64 list or several values are refused)."""
    scores = {}
    for key in SCORES:
        if key not in features:
            continue
        kind = features[key].WhichOneof("kind")
        values = getattr(features[key], kind).value if kind else []
        if kind != "float_list" or len(values) != 1:
            raise DatasetFormatError(f"{where}: '{key}' must be one float, found {len(values)} values in a {kind}")
        if not math.isfinite(values[0]):
            raise DatasetFormatError(f"{where}: '{key}' must be a finite number, found {values[0]}")
        scores[key] = float(values[0])
    return scores


def read_rich_hf(
    path: str | os.PathLike, prompts: Mapping[str, str], image_dir: str | os.PathLike | None = None
) -> pl.DataFrame:
    """Word-labelled prompts of one RichHF-18K split.

    Parameters
    ----------
    path : path-like
        ``{train,dev,test}.tfrecord``.
    prompts : mapping
        Image uid → prompt (see :func:`pick_a_pic_prompts`); every record's uid must be present.
    image_dir : path-like, optional
        Folder holding the images by ``filename``; when given every image must exist and ``path``
        is added.

    Returns
    -------
    polars.DataFrame
        ``filename``, ``image_uid``, ``caption`` (the prompt), ``words``, ``labels`` (1 = the word
        is misaligned, i.e. the dataset's 0), and the float scores present in the file.

    Raises
    ------
    DatasetFormatError
        Naming the file and the record: a missing or repeated field value, labels other than 0/1,
        an image listed twice, a uid without a prompt, a score that is not one finite float, or a
        record whose scores are not those of the file's first record. A record whose prompt has no
        word, or a word count other than its label count, is dropped and counted.
    """
    path = Path(path)
    rows, seen, uids, score_keys = [], {}, {}, None
    dropped = {"token and label counts differ": 0, "prompt has no word": 0}
    for index, features in _examples(path):
        filename = relative_path(_bytes(features, "filename", path, index), f"{path}: record {index}", "filename")
        where = f"{path}: record {index} ({filename})"
        if filename in seen:
            raise DatasetFormatError(f"{where}: image listed twice (first in record {seen[filename]})")
        seen[filename] = index
        raw_labels = _bytes(features, "prompt_misalignment_label", path, index).split()
        if not all(label in ("0", "1") for label in raw_labels):
            raise DatasetFormatError(f"{where}: prompt_misalignment_label must hold 0/1 values")
        scores = _scores(features, where)
        score_keys = list(scores) if score_keys is None else score_keys
        if list(scores) != score_keys:
            raise DatasetFormatError(f"{where}: holds scores {list(scores)}, the file's first record {score_keys}")
        uid = Path(filename).stem
        if uids.setdefault(uid, filename) != filename:  # the uid keys the prompt: two files would share one
            raise DatasetFormatError(f"{where}: image uid {uid} is also {uids[uid]}'s (one prompt for two files)")
        if uid not in prompts:
            raise DatasetFormatError(f"{where}: no Pick-a-Pic prompt for image uid {uid}")
        words = split_prompt(text_field(prompts[uid], where, "prompt"))
        if not words or len(words) != len(raw_labels):
            dropped["prompt has no word" if not words else "token and label counts differ"] += 1
            continue
        rows.append(
            {
                "filename": filename,
                "image_uid": uid,
                "caption": prompts[uid],
                "words": words,
                "labels": [1 - int(label) for label in raw_labels],
                **scores,
            }
        )
    report_rows(path, len(rows), dropped)
    schema = {
        "filename": pl.String,
        "image_uid": pl.String,
        "caption": pl.String,
        "words": pl.List(pl.String),
        "labels": pl.List(pl.Int8),
    }
    frame = pl.DataFrame(rows, schema={**schema, **{key: pl.Float64 for key in score_keys or ()}})
    if image_dir is not None:
        root = Path(image_dir)
        absent = next((name for name in frame["filename"] if not (root / name).is_file()), None)
        if absent is not None:
            raise DatasetFormatError(f"{path}: image {root / absent} is missing")
        frame = frame.with_columns((pl.lit(str(root) + os.sep) + pl.col("filename")).alias("path"))
    return frame


def write_rich_hf(path: str | os.PathLike, records: Iterable[Mapping]) -> None:
    """Write records (``filename``, ``prompt_misalignment_label`` and float scores) as a TFRecord
    of ``tf.train.Example``, the release's format; atomically."""
    from tfrecord.writer import TFRecordWriter

    with atomic_path(path) as tmp:
        writer = TFRecordWriter(str(tmp))
        for record in records:
            datum = {
                "filename": (record["filename"].encode(), "byte"),
                "prompt_misalignment_label": (record["prompt_misalignment_label"].encode(), "byte"),
            }
            datum.update({key: (float(record[key]), "float") for key in SCORES if key in record})
            writer.write(datum)
        writer.close()


def pick_a_pic_prompts(paths: Iterable[str | os.PathLike]) -> dict[str, str]:
    """Image uid → prompt from Pick-a-Pic v1 Parquet files (``caption``, ``image_0_uid``, ``image_1_uid``).

    An image appears in several rows (one per comparison); every row must give it the same caption.

    Raises
    ------
    DatasetFormatError
        Naming the file and the row: a missing file or column, a null or empty uid or caption, or a uid
        whose caption differs from the one an earlier row (of any file) gave it.
    """
    prompts: dict[str, str] = {}
    origins: dict[str, str] = {}
    for path in paths:
        try:
            frame = pl.read_parquet(path, columns=["caption", "image_0_uid", "image_1_uid"])
        except FileNotFoundError:
            raise DatasetFormatError(f"{path}: file not found") from None
        except pl.exceptions.ColumnNotFoundError as error:
            raise DatasetFormatError(f"{path}: Pick-a-Pic column missing ({error})") from None
        except (pl.exceptions.PolarsError, OSError) as error:  # not Parquet, truncated
            raise DatasetFormatError(f"{path}: not a readable Parquet file ({error})") from None
        captions = frame["caption"].to_list()
        for column in ("image_0_uid", "image_1_uid"):
            for row, (uid, caption) in enumerate(zip(frame[column].to_list(), captions)):
                uid = text_field(uid, f"{path}: row {row}", column)
                caption = text_field(caption, f"{path}: row {row}", "caption")
                if prompts.setdefault(uid, caption) != caption:
                    raise DatasetFormatError(
                        f"{path}: row {row}: image {uid} has caption {caption!r}, but {origins[uid]} gave it "
                        f"{prompts[uid]!r}"
                    )
                origins.setdefault(uid, f"{path}: row {row}")
        report_rows(path, frame.height, {}, "comparisons")
    return prompts

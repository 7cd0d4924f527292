"""Dataset loaders shared by every track, each for its dataset's real file format.

A malformed file raises :class:`DatasetFormatError` naming the file and the offending record:
a field of the wrong type, a null, bytes that are not UTF-8, an empty or white-space caption, a
NaN or infinite score, or a path that leaves the data root. A record dropped on purpose (a
documented reason, e.g. FOIL's pairs whose token counts differ) is logged with its reason and
counted by every :func:`counting_dropped_rows` block that is open.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath, PureWindowsPath

from condeval.core.io import DuplicateKeyError, unique_keys

__all__ = [
    "DatasetFormatError",
    "DroppedRows",
    "counting_dropped_rows",
    "report_rows",
    "read_text",
    "read_json",
    "text_field",
    "integer_field",
    "finite_number",
    "relative_path",
]

log = logging.getLogger("condeval")


class DatasetFormatError(ValueError):
    """A dataset file is missing, unreadable, or breaks its format (names the file and the record).

    Examples
    --------
    >>> from condeval.datasets import DatasetFormatError, integer_field
    >>> try:
    ...     integer_field("17", "captions.json, annotation 3", "image_id")
    ... except ValueError as error:                         # a ValueError, so callers may catch either
    ...     print(type(error).__name__, "|", error)
    DatasetFormatError | captions.json, annotation 3: 'image_id' must be an integer, found '17'
    """


def read_text(path: str | os.PathLike) -> str:
    """A released text file's content, decoded as UTF-8 (a byte-order mark, as Windows editors write, is dropped).

    Raises :class:`DatasetFormatError` naming the file when it is missing, not a readable file (a
    folder, no permission) or not UTF-8.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from condeval.datasets import read_text
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = Path(folder, "captions.txt")
    ...     _ = path.write_bytes(b"\\xef\\xbb\\xbfa red star\\n")      # a byte-order mark, as Notepad writes
    ...     read_text(path)
    'a red star\\n'
    >>> read_text("no-such-file.txt")
    Traceback (most recent call last):
    ...
    condeval.datasets.DatasetFormatError: no-such-file.txt: file not found
    """
    path = Path(path)
    try:
        return path.read_bytes().decode("utf-8-sig")
    except FileNotFoundError:
        raise DatasetFormatError(f"{path}: file not found") from None
    except UnicodeDecodeError as error:
        raise DatasetFormatError(f"{path}: not UTF-8 text (byte {error.start})") from None
    except OSError as error:  # a folder, no permission
        raise DatasetFormatError(f"{path}: not a readable file ({error.strerror})") from None


def read_json(path: str | os.PathLike, expected: type) -> object:
    """The JSON document of a released file, which must be a ``expected`` (dict or list); an object naming
    one key twice (an image id given twice, two ``images`` lists) is refused, not cut to its last value.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from condeval.datasets import DatasetFormatError, read_json
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = Path(folder, "captions.json")
    ...     _ = path.write_text('{"images": [1, 2], "images": [3]}')
    ...     try:
    ...         read_json(path, dict)
    ...     except DatasetFormatError as error:
    ...         print(str(error).replace(folder, "<folder>"))
    <folder>/captions.json: the key 'images' appears twice in one object (the first would be dropped)
    """
    path = Path(path)
    try:
        document = json.loads(read_text(path), object_pairs_hook=unique_keys)
    except json.JSONDecodeError as error:
        raise DatasetFormatError(f"{path}: not valid JSON ({error})") from None
    except DuplicateKeyError as error:
        raise DatasetFormatError(f"{path}: {error}") from None
    if not isinstance(document, expected):
        raise DatasetFormatError(
            f"{path}: expected a JSON {'object' if expected is dict else 'list'}, found {type(document).__name__}"
        )
    return document


def text_field(value: object, where: str, field: str) -> str:
    """``value`` stripped; raises naming ``where`` and ``field`` unless it is a string with text in it.

    Examples
    --------
    >>> from condeval.datasets import text_field
    >>> text_field("  a red star ", "captions.json, annotation 3", "caption")
    'a red star'
    >>> text_field("   ", "captions.json, annotation 4", "caption")
    Traceback (most recent call last):
    ...
    condeval.datasets.DatasetFormatError: captions.json, annotation 4: 'caption' must be a non-empty string, found '   '
    """
    if not isinstance(value, str) or not value.strip():
        raise DatasetFormatError(f"{where}: '{field}' must be a non-empty string, found {value!r}")
    return value.strip()


def integer_field(value: object, where: str, field: str) -> int:
    """``value``, which must be a JSON integer (not a bool, float or string) that fits 64 bits.

    Examples
    --------
    >>> from condeval.datasets import integer_field
    >>> integer_field(391895, "captions.json, annotation 0", "image_id")
    391895
    >>> integer_field(True, "captions.json, annotation 1", "image_id")
    Traceback (most recent call last):
    ...
    condeval.datasets.DatasetFormatError: captions.json, annotation 1: 'image_id' must be an integer, found True
    """
    if not isinstance(value, int) or isinstance(value, bool):
        raise DatasetFormatError(f"{where}: '{field}' must be an integer, found {value!r}")
    if not -(2**63) <= value < 2**63:
        raise DatasetFormatError(f"{where}: '{field}' {value} does not fit a 64-bit integer")
    return value


def finite_number(value: object, where: str, field: str) -> float:
    """``value`` as a float; raises unless it is a finite number (not a bool, string, NaN or ±inf).

    Examples
    --------
    >>> from condeval.datasets import finite_number
    >>> finite_number(3, "expert.json, row 7", "score")
    3.0
    >>> finite_number(float("nan"), "expert.json, row 8", "score")
    Traceback (most recent call last):
    ...
    condeval.datasets.DatasetFormatError: expert.json, row 8: 'score' must be a finite number, found nan
    """
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise DatasetFormatError(f"{where}: '{field}' must be a finite number, found {value!r}")
    return float(value)


def relative_path(value: object, where: str, field: str) -> str:
    """A path from a data file, which must stay under its data root: relative, without ``..``.

    The text is checked, not the file system: a symbolic link under the root is followed (DVC's
    link cache and a lab's shared copies are links), so a link is trusted as its root's owner made it.

    Examples
    --------
    >>> from condeval.datasets import relative_path
    >>> relative_path("images/0001.jpg", "split.json, image 0", "file_name")
    'images/0001.jpg'
    >>> relative_path("images/../../secret.jpg", "split.json, image 1", "file_name")
    Traceback (most recent call last):
    ...
    condeval.datasets.DatasetFormatError: split.json, image 1: 'file_name' 'images/../../secret.jpg' leaves the
    data root (absolute, or with '..')
    """
    text = text_field(value, where, field)
    posix, windows = PurePosixPath(text), PureWindowsPath(text)
    if posix.is_absolute() or windows.is_absolute() or windows.drive or ".." in windows.parts:
        raise DatasetFormatError(f"{where}: '{field}' {text!r} leaves the data root (absolute, or with '..')")
    return text


class DroppedRows:
    """Rows the loaders dropped on purpose, by file and reason (the per-benchmark summary).

    Every file a loader reads inside :func:`counting_dropped_rows` is listed, with ``{}`` when
    nothing was dropped, so a summary shows that a file was read and kept whole.

    Examples
    --------
    >>> from condeval.datasets import DroppedRows
    >>> dropped = DroppedRows()
    >>> dropped.add("foil_test.json", {"token counts differ": 2, "blank caption": 0})
    >>> dropped.add("captions.json", {})                     # read and kept whole
    >>> dropped.add("foil_test.json", {"token counts differ": 1})
    >>> dropped.as_dict(), dropped.total()
    ({'captions.json': {}, 'foil_test.json': {'token counts differ': 3}}, 3)
    """

    def __init__(self) -> None:
        self.by_file: dict[str, Counter] = {}

    def add(self, path: str | os.PathLike, dropped: Mapping[str, int]) -> None:
        """Count ``dropped`` (reason → rows) for ``path``."""
        self.by_file.setdefault(str(path), Counter()).update({reason: n for reason, n in dropped.items() if n})

    def total(self) -> int:
        """Rows dropped over all files and reasons."""
        return sum(sum(counts.values()) for counts in self.by_file.values())

    def as_dict(self) -> dict[str, dict[str, int]]:
        """File → reason → rows dropped, as JSON-ready plain dicts."""
        return {path: dict(sorted(counts.items())) for path, counts in sorted(self.by_file.items())}

    def write(self, path: str | os.PathLike) -> None:
        """Write :meth:`as_dict` as a JSON summary, atomically."""
        from condeval.core.io import write_json

        write_json(self.as_dict(), path)


_OPEN_COUNTERS: list[DroppedRows] = []


@contextlib.contextmanager
def counting_dropped_rows() -> Iterator[DroppedRows]:
    """Collect what every loader called inside the block drops: ``with counting_dropped_rows() as dropped:``.

    Examples
    --------
    >>> from condeval.datasets import counting_dropped_rows, report_rows
    >>> with counting_dropped_rows() as dropped:             # a loader reports what it kept and dropped
    ...     report_rows("foil_test.json", kept=98, dropped={"token counts differ": 2})
    >>> dropped.as_dict()
    {'foil_test.json': {'token counts differ': 2}}
    >>> report_rows("foil_val.json", kept=5, dropped={"token counts differ": 1})   # no block open: only logged
    >>> dropped.total()
    2
    """
    dropped = DroppedRows()
    _OPEN_COUNTERS.append(dropped)
    try:
        yield dropped
    finally:
        _OPEN_COUNTERS.remove(dropped)


def report_rows(path: str | os.PathLike, kept: int, dropped: Mapping[str, int], unit: str = "records") -> None:
    """Log what a loader kept and dropped (by reason), and count the drops in every open counter.

    Raises :class:`DatasetFormatError` naming the file when it kept nothing (a 0-byte or header-only
    file, or every record dropped): an empty benchmark would give empty tables or NaN, not an error.

    Examples
    --------
    >>> from condeval.datasets import counting_dropped_rows, report_rows
    >>> with counting_dropped_rows() as dropped:
    ...     report_rows("expert.csv", kept=10, dropped={"blank caption": 1}, unit="judgments")
    >>> dropped.total()
    1
    >>> report_rows("empty.csv", kept=0, dropped={"blank caption": 3}, unit="judgments")
    Traceback (most recent call last):
    ...
    condeval.datasets.DatasetFormatError: empty.csv: no judgments in it (all dropped: 3 blank caption)
    """
    reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(dropped.items()) if n)
    if kept == 0:
        raise DatasetFormatError(f"{path}: no {unit} in it" + (f" (all dropped: {reasons})" if reasons else ""))
    log.info(
        "%s: %d %s kept, %d dropped%s", path, kept, unit, sum(dropped.values()), f" ({reasons})" if reasons else ""
    )
    for counter in _OPEN_COUNTERS:
        counter.add(path, dropped)

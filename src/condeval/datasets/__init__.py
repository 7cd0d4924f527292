"""Dataset loaders shared by every track, each for its dataset's real file format.

A malformed file raises :class:`DatasetFormatError` naming the file and the offending record.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["DatasetFormatError", "read_json"]


class DatasetFormatError(ValueError):
    """A dataset file is missing, unreadable, or breaks its format (names the file and the record)."""


def read_json(path: str | os.PathLike, expected: type) -> object:
    """The JSON document of a released file, which must be a ``expected`` (dict or list)."""
    path = Path(path)
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        raise DatasetFormatError(f"{path}: file not found") from None
    except json.JSONDecodeError as error:
        raise DatasetFormatError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(document, expected):
        raise DatasetFormatError(f"{path}: expected a JSON {'object' if expected is dict else 'list'}, found {type(document).__name__}")
    return document

"""Dataset loaders shared by every track, each for its dataset's real file format.

A malformed file raises :class:`DatasetFormatError` naming the file and the offending record.
"""

from __future__ import annotations

__all__ = ["DatasetFormatError"]


class DatasetFormatError(ValueError):
    """A dataset file is missing, unreadable, or breaks its format (names the file and the record)."""

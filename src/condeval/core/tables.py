"""Table rendering shared by every track's reports."""

from __future__ import annotations

import polars as pl

__all__ = ["markdown_table", "with_bounds"]


def markdown_table(frame: pl.DataFrame) -> str:
    """A frame as a GitHub-flavoured Markdown table (polars' own formatter), every row and column.

    Cells are rendered as polars prints them; format numbers into strings first where the
    digits matter.
    """
    with pl.Config(
        tbl_formatting="MARKDOWN",
        tbl_hide_column_data_types=True,
        tbl_hide_dataframe_shape=True,
        tbl_rows=-1,
        tbl_cols=-1,
        fmt_str_lengths=10_000,
        tbl_width_chars=60_000,  # polars keeps the width in 16 bits
    ):
        return f"{frame}\n"


def with_bounds(values: dict, key: str, digits: int = 3, missing: str = "–") -> str:
    """A cell: ``values[key]`` with its 95% interval in brackets where ``values`` has one (``<key>_low``,
    ``<key>_high``, neither NaN); ``missing`` where the value is NaN or absent.

    Examples
    --------
    >>> with_bounds({"R@5": 0.5041, "R@5_low": 0.473, "R@5_high": 0.535}, "R@5"), with_bounds({"auc": 0.5841}, "auc")
    ('0.504 [0.473–0.535]', '0.584')
    >>> with_bounds({"precision": float("nan")}, "precision")
    '–'
    """
    value, low, high = values.get(key), values.get(f"{key}_low"), values.get(f"{key}_high")
    if value is None or value != value:
        return missing
    if low is None or high is None or low != low or high != high:
        return f"{value:.{digits}f}"
    return f"{value:.{digits}f} [{low:.{digits}f}–{high:.{digits}f}]"

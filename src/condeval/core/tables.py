"""Table rendering shared by every track's reports."""

from __future__ import annotations

import polars as pl

__all__ = ["markdown_table"]


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

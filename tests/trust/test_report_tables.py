"""The Markdown tables behind Figs. 2, 7, 8 and 9: every value of the figure, in its row and column."""

import numpy as np
import polars as pl

from condeval.trust.report import deciles_markdown, graded_shift_markdown


def _rankings():
    rows = []
    for variant in ("vanilla", "repa"):
        for score in ("faithfulness", "trust"):
            for b in range(10):
                rows.append(
                    {
                        "variant": variant,
                        "score": score,
                        "bin": b,
                        "kid": b / 10,
                        "z_kid": float(b),
                        "accuracy": 1 - b / 10,
                    }
                )
    return pl.DataFrame(rows)


def test_deciles_table_holds_every_decile_in_order():
    rankings = _rankings()
    lines = deciles_markdown(rankings).splitlines()
    assert lines[0].count("decile") == 10
    assert len(lines) == 2 + 2 * 2 * 3  # a row per model, score and metric
    first = lines[2].split(" | ")
    assert first[:3] == ["| repa", "trust", "KID"]  # the paper's score order: trust, then faithfulness
    assert [float(c.strip(" |")) for c in first[3:]] == [round(b / 10, 2) for b in range(10)]


def test_a_missing_or_undefined_decile_is_an_empty_cell():
    rankings = _rankings().with_columns(
        pl.when(pl.col("bin") == 4).then(np.nan).otherwise(pl.col("accuracy")).alias("accuracy")
    )
    rankings = rankings.filter(~((pl.col("bin") == 9) & (pl.col("variant") == "vanilla")))
    lines = deciles_markdown(rankings).splitlines()
    accuracy = next(line for line in lines if line.startswith("| vanilla | trust | accuracy"))
    cells = [c.strip() for c in accuracy.strip("|").split("|")][3:]
    assert cells[4] == "" and cells[9] == "" and cells[0] == "1.00"


def test_graded_shift_table_counts_conditions_and_averages_per_distance():
    shift = pl.DataFrame(
        {
            "variant": ["a", "a", "a", "b"],
            "hamming": [0, 2, 2, 1],
            "mean_trust": [1.0, 3.0, 5.0, 7.0],
            "kid_all": [0.1, 0.2, 0.4, 0.3],
        }
    )
    lines = graded_shift_markdown(shift).splitlines()
    assert lines[2:] == ["| a | 0 | 1 | 1.00 | 0.10 |", "| a | 2 | 2 | 4.00 | 0.30 |", "| b | 1 | 1 | 7.00 | 0.30 |"]

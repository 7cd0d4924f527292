"""The Markdown tables behind Figs. 2, 7, 8 and 9: every value of the figure, in its row and column."""

import numpy as np
import polars as pl

from condeval.trust.report import (
    deciles_markdown,
    during_generation_markdown,
    graded_shift_markdown,
    support_shift_markdown,
)


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
    assert lines[0].count("decile") == 10 + 2  # and "decile 10 − decile 1"
    assert len(lines) == 2 + 2 * 2 * 3  # a row per model, score and metric
    first = lines[2].split(" | ")
    assert first[:3] == ["| repa", "trust", "KID"]  # the paper's score order: trust, then faithfulness
    assert [float(c.strip(" |")) for c in first[3:13]] == [round(b / 10, 2) for b in range(10)]
    assert first[13].strip(" |") == ""  # no change measured


def test_deciles_cells_carry_their_intervals_and_the_last_column_the_change():
    rankings = _rankings().with_columns(
        (pl.col("kid") - 0.05).alias("kid_low"),
        (pl.col("kid") + 0.05).alias("kid_high"),
        (pl.col("kid") - 0.0).alias("kid_change"),
        (pl.col("kid") - 0.1).alias("kid_change_low"),
        (pl.col("kid") + 0.1).alias("kid_change_high"),
    )
    row = deciles_markdown(rankings).splitlines()[2].strip("| ").split(" | ")
    assert row[3] == "0.00 (-0.05, 0.05)" and row[12] == "0.90 (0.85, 0.95)"
    assert row[13] == "0.90 (0.80, 1.00)"  # the last decile's change from the first


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
    # one condition has no interval; two give the bootstrap's over their two values
    assert lines[2:] == [
        "| a | 0 | 1 | 1.00 | 0.10 |",
        "| a | 2 | 2 | 4.00 (3.00, 5.00) | 0.30 (0.20, 0.40) |",
        "| b | 1 | 1 | 7.00 | 0.30 |",
    ]


def _steps() -> pl.DataFrame:
    """Scoring-during-generation rows of one generator: a step with conditions kept, one without, post."""
    kept = {
        "kid_trust": 0.5,
        "kid_trust_low": 0.4,
        "kid_trust_high": 0.65,
        "kid_random": 0.6,
        "improvement": 16.7,
        "improvement_low": 2.5,
        "improvement_high": 30.0,
        "improvement_official": 12.0,
        "improvement_official_low": -3.0,
        "improvement_official_high": 25.0,
        "rho_realism": 0.9,
        "rho_faithfulness": 0.8,
        "rho_trust": 0.85,
    }
    common = {"variant": "vanilla", "path": "translator", "steps_run_pct": 50.0, "steps_saved_pct": 40.0}
    return pl.DataFrame(
        [
            common | kept | {"scoring": "during", "step": 5, "accept": 30.0, "accept_low": 20.0, "accept_high": 41.0},
            common | {"scoring": "during", "step": 2, "accept": 1.0, "kid_trust": None},
            common | kept | {"scoring": "post", "step": 10, "accept": 35.0},
        ]
    )


def test_the_during_generation_tables_give_both_gains_and_the_intervals_they_have():
    table = during_generation_markdown(_steps(), {}).splitlines()
    assert "gain %, the official code's (95% CI) | gain %, ratio of mean KIDs (95% CI) | Accept% (95% CI)" in table[0]
    during, empty, post = table[2:5]
    assert (
        "| 0.500 (0.400, 0.650) | 0.600 | 12.0 (-3.0, 25.0) | 16.7 (2.5, 30.0) | 30.0 (20.0, 41.0) | 40.0% |" in during
    )
    assert "– (no condition kept) | – | 1.0 | – |" in empty
    assert post.startswith("| vanilla | translator | post generation |") and "| 35.0 |" in post
    shift = support_shift_markdown(_steps()).splitlines()
    assert (
        shift[4] == "| translator | vanilla | 30.0 (20.0, 41.0) | 0.500 (0.400, 0.650) | 0.600 | 12.0 (-3.0, 25.0) | "
        "16.7 (2.5, 30.0) | 0.90 | 0.80 | 0.85 |"
    )

"""The crc tables say what the sets could not see: calibration units, refused captions, never-scored words."""

import numpy as np
import polars as pl

from condeval.crc.report import dropped_rows_markdown, sweep_markdown, table4_markdown


def _sweep():
    row = {
        "alpha": 0.2,
        "lambda_hat": 0.7,
        "calibration_risk": 0.1,
        "calibration_f1": 0.5,
        "test_risk": 0.12,
        "test_ap": 0.6,
        "test_f1": 0.5,
        "test_precision": 0.4,
        "test_recall": 0.6,
        "test_word_f1": 0.48,
        "test_set_size": 1.2,
        "unit": "image",
        "n_calibration": 398,
        "n_units": 199,
        "n_refused_truncated": 3,
        "test_unscored_words": 0.43,
        "test_unscored_errors": 0.1,
    }
    return pl.DataFrame([row])


def test_sweep_table_counts_units_refusals_and_never_scored_words():
    text = sweep_markdown(_sweep(), "fpr")
    assert "Calibrated on 398 captions, n = 199 images" in text
    assert "max_length): 3 captions" in text
    assert "43.00% of test words, 10.00% of test errors" in text


def test_the_sweep_table_gives_the_test_risk_and_f1_their_intervals():
    with_intervals = _sweep().with_columns(test_risk_low=0.1, test_risk_high=0.145, test_f1_low=0.45, test_f1_high=0.55)
    text = sweep_markdown(with_intervals, "fpr")
    assert "12.00 (10.00–14.50)" in text and "50.00 (45.00–55.00)" in text
    assert "| 12.00 " in sweep_markdown(_sweep(), "fpr")  # a sweep written before the intervals: the estimate alone


def test_selected_tables_count_refusals_per_benchmark():
    selected = pl.DataFrame(
        {
            "domain": ["overall"],
            "benchmark": ["rich_hf"],
            "alpha": [0.2],
            "precision": [0.4],
            "recall": [0.6],
            "word_f1": [0.48],
            "risk": [0.1],
            "n_refused_truncated": [5],
        }
    )
    assert "tiny CLIP on rich_hf: 5" in table4_markdown({"tiny-clip": selected}, {"tiny-clip": "tiny CLIP"}, {})


def test_report_captions_are_valid_restructuredtext():
    """Snakemake renders the captions with docutils: a stray |…| is read as a substitution and fails."""
    from pathlib import Path

    from docutils import nodes
    from docutils.core import publish_doctree
    from docutils.utils import Reporter

    for caption in sorted(Path(__file__).parents[2].joinpath("workflow", "report", "crc").glob("*.rst")):
        tree = publish_doctree(
            caption.read_text(),
            settings_overrides={
                "report_level": Reporter.INFO_LEVEL,
                "halt_level": Reporter.SEVERE_LEVEL + 1,
                "warning_stream": False,
            },
        )
        problems = [
            node.astext()
            for node in tree.findall(lambda node: isinstance(node, (nodes.problematic, nodes.system_message)))
        ]
        assert not problems, (caption.name, problems)


def test_dropped_rows_table_lists_every_file_read_and_each_reason():
    text = dropped_rows_markdown(
        {
            "foil_it": {"foil/test.json": {"token counts differ": 7}, "foil/train.json": {}},
            "polaris": {"polaris.parquet": {"no word left after normalisation": 2}},
        }
    )
    lines = [line.replace(" ", "") for line in text.splitlines()]
    assert "|foil_it|foil/test.json|tokencountsdiffer|7|" in lines
    assert "|foil_it|foil/train.json|none|0|" in lines
    assert "|polaris|polaris.parquet|nowordleftafternormalisation|2|" in lines


def test_fig1_never_shows_a_pair_clipscore_clipped_to_zero():
    """The lowest-variance pick was a pair scored 0 throughout (its violin a flat line at the clip):
    Fig. 1's three pairs come from the pairs with no clipped score when there are any."""
    import matplotlib

    matplotlib.use("Agg")
    from condeval.crc.report import plot_violins

    rng = np.random.default_rng(0)
    samples = [np.zeros(20)] + [0.5 + rng.normal(0, 0.01 * (k + 1), 20) for k in range(6)]
    pairs = pl.DataFrame(
        {
            "samples": [s.tolist() for s in samples],
            "std": [float(s.std()) for s in samples],
            "clipscore": [0.0] + [0.5] * 6,
            "words": [["clipped"]] + [[f"pair{k}"] for k in range(6)],
            "human_score": [0.5] * 7,
        }
    )
    for seed in range(10):
        figure = plot_violins(pairs, seed, "t")
        ticks = " ".join(label.get_text() for label in figure.axes[0].get_xticklabels())
        assert "clipped" not in ticks and "pair0" in ticks and "pair5" in ticks, ticks


def test_every_table4_row_reads_precision_recall_and_their_harmonic_mean():
    """The paper prints the cited rows' F1 and precision swapped; stored by meaning, every row's F1 is the
    harmonic mean of its precision and recall (to the paper's one decimal)."""
    from condeval.crc.paper import TABLE4

    for method, row in TABLE4.items():
        f1 = 2 * row["precision"] * row["recall"] / (row["precision"] + row["recall"])
        assert abs(f1 - row["word_f1"]) < 0.15, f"{method}: F1 {row['word_f1']}, harmonic mean {f1:.2f}"

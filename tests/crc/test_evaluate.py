"""The experiment layer: sweeps control the risk on held-out captions, the α pick, signal and joins."""

import numpy as np
import polars as pl
import pytest
from sklearn.metrics import average_precision_score, f1_score

from condeval.core.conformal import resampled_rows, unit_bootstrap_interval
from condeval.crc.benchmarks import image_subsets
from condeval.crc.evaluate import (
    ap_interval,
    bootstrap_intervals,
    detection_signal,
    interval_metrics,
    join_samples,
    refuse_truncated,
    risk_sweep,
    select_alpha,
    set_metrics,
    word_arrays,
)
from condeval.crc.intervals import PAPER_LAMBDAS
from condeval.crc.metrics import caption_counts, caption_truth_and_score, fdr, fpr
from condeval.crc.report import signal_markdown


def _captions(
    n: int, rng: np.random.Generator, separation: float = 2.0, function_words: int = 0, images: str = "image"
) -> pl.DataFrame:
    """Simulated captions, two per image (``<images>-<k>.jpg``): 3–8 valid words, half with one error;
    f_v = σ(separation·label + noise).

    ``function_words`` correct DET words are appended to each caption, scored 0 (never masked).
    """
    rows = []
    for key in range(n):
        length = int(rng.integers(3, 9))
        labels = np.zeros(length, dtype=int)
        if rng.random() < 0.5:
            labels[rng.integers(length)] = 1
        scores = 1 / (1 + np.exp(-(separation * labels - 1 + rng.normal(0, 1, length))))
        rows.append(
            {
                "key": key,
                "path": f"{images}-{key // 2}.jpg",
                "labels": labels.tolist() + [0] * function_words,
                "word_scores": scores.tolist() + [0.0] * function_words,
                "pos": ["NOUN"] * length + ["DET"] * function_words,
            }
        )
    return pl.DataFrame(
        rows,
        schema={
            "key": pl.Int64,
            "path": pl.String,
            "labels": pl.List(pl.Int64),
            "word_scores": pl.List(pl.Float64),
            "pos": pl.List(pl.String),
        },
    )


@pytest.mark.parametrize("risk", ["fdr", "fpr"])
def test_a_sweep_controls_the_test_risk_and_loosens_with_alpha(risk):
    rng = np.random.default_rng(0)
    calibration, test = _captions(2000, rng), _captions(4000, rng, images="test")
    sweep = risk_sweep(calibration, test, [0.1, 0.2, 0.3], delta=0.05, risk=risk)
    assert (sweep["test_risk"] <= sweep["alpha"] + 0.01).all(), sweep  # the bound's slack: well below α + MC error
    assert (sweep["calibration_risk"] <= sweep["alpha"]).all()
    assert sweep["lambda_hat"].is_sorted(descending=True) and sweep["test_set_size"].is_sorted()
    assert sweep["test_set_size"][0] > 0.05  # not trivially empty sets
    best = sweep.sort("calibration_f1")["alpha"][-1]
    assert select_alpha(sweep) == best


def test_fpr_is_controlled_over_the_valid_words():
    """Never-masked words (f_v = 0) are not true negatives: with them counted the sets' FPR on the
    words they can flag exceeded α."""
    rng = np.random.default_rng(1)
    calibration, test = _captions(2000, rng, function_words=5), _captions(4000, rng, function_words=5, images="test")
    sweep = risk_sweep(calibration, test, [0.1, 0.2, 0.3], delta=0.05, risk="fpr")
    for alpha, threshold in zip(sweep["alpha"], sweep["lambda_hat"]):
        scores, labels, groups = word_arrays(test)
        valid = np.asarray([p != "DET" for p in test["pos"].explode()])
        assert fpr((scores > threshold)[valid], labels[valid], groups[valid]) <= alpha + 0.01
    assert sweep["test_unscored_words"][0] == pytest.approx(5 * 4000 / test["labels"].list.len().sum())
    assert (
        (sweep["test_unscored_errors"] == 0).all()
        and (sweep["n_units"] == 1000).all()
        and (sweep["unit"] == "image").all()
    )


def test_captions_with_truncated_words_are_refused_and_counted():
    frame = pl.DataFrame({"key": [0, 1, 2], "truncated_words": [0, 12, 0]})
    kept, refused = refuse_truncated(frame)
    assert kept["key"].to_list() == [0, 2] and refused == 1
    assert refuse_truncated(frame.drop("truncated_words"))[1] == 0


def test_set_metrics_refuses_an_unknown_risk_and_labels_that_are_not_0_or_1():
    """'FDR' silently computed the FPR; a label of 0.5 became 0 (a lab's trial)."""
    frame = pl.DataFrame(
        {
            "key": [0, 1],
            "labels": [[0, 1], [0, 0]],
            "word_scores": [[0.2, 0.9], [0.3, 0.4]],
            "pos": [["NOUN", "NOUN"], ["NOUN", "VERB"]],
        }
    )
    assert set_metrics(frame, 0.5, "fdr")["risk"] == 0.0
    with pytest.raises(ValueError, match=r"risk must be one of \('fdr', 'fpr'\); got 'FDR'"):
        set_metrics(frame, 0.5, "FDR")
    with pytest.raises(ValueError, match="labels must be 0/1 or bool per word; word 1 is 0.5"):
        set_metrics(frame.with_columns(labels=pl.Series([[0.0, 0.5], [0.0, 0.0]])), 0.5, "fdr")


def test_detection_signal_against_chance():
    frame = pl.DataFrame(
        {
            "key": [0, 1, 2],
            "path": ["a.jpg", "a.jpg", "b.jpg"],
            "labels": [[0, 1, 0], [0, 0], [1, 0, 0, 0]],
            "word_scores": [[0.2, 0.9, 0.0], [0.3, 0.4], [0.8, 0.1, 0.7, 0.0]],
            "pos": [["ADJ", "NOUN", "DET"], ["NOUN", "VERB"], ["NOUN", "ADP", "NOUN", "DET"]],
        }
    )
    signal = detection_signal(frame)
    assert signal["la"] == 1.0 and signal["ap"] == 1.0
    assert signal["ap_chance"] == pytest.approx(2 / 3)
    assert signal["la_chance"] == pytest.approx((1 / 2 + 1 / 2) / 2)  # valid words: NOUN, PROPN, NUM, VERB, ADJ, ADV
    assert signal["la_noun_chance"] == pytest.approx((1 / 1 + 1 / 2) / 2)
    flipped = frame.with_columns(pl.col("word_scores").list.eval(1 - pl.element()))
    assert detection_signal(flipped)["la"] < 1.0


def test_detection_signals_intervals_draw_whole_images():
    """AP and LA come with their 95% intervals over images, which hold the estimates; an image's two
    captions are one unit, so giving every caption its own image widens nothing it should not."""
    rng = np.random.default_rng(0)
    n = 60
    labels = [[int(i % 3 == 0), 0, 0] for i in range(n)]
    scores = [[float(label[0] + rng.normal(0, 0.8)), float(rng.normal()), float(rng.normal())] for label in labels]
    frame = pl.DataFrame(
        {
            "key": range(n),
            "path": [f"{i // 2}.jpg" for i in range(n)],
            "labels": labels,
            "word_scores": scores,
            "pos": [["NOUN", "ADJ", "VERB"]] * n,
        }
    )
    signal = detection_signal(frame)
    for key in ("ap", "la"):
        assert signal[f"{key}_low"] < signal[key] < signal[f"{key}_high"], key
    assert (signal["ap_low"], signal["ap_high"]) == pytest.approx(tuple(ap_interval(frame).values()))
    assert (signal["la_low"], signal["la_high"]) == pytest.approx(
        tuple(bootstrap_intervals(frame, -np.inf, "fdr")[k] for k in ("la_low", "la_high"))
    )
    table = signal_markdown({("tiny-clip", "foil_it"): signal})
    assert f"{100 * signal['ap']:.2f} ({100 * signal['ap_low']:.2f}–{100 * signal['ap_high']:.2f})" in table


def test_join_samples_refuses_gaps_duplicates_and_non_finite_scores():
    captions = pl.DataFrame({"key": [0, 1], "labels": [[0], [1]]})
    samples = pl.DataFrame({"key": [0, 1], "clipscore": [0.5, 0.6], "mean": [0.4, 0.5], "std": [0.1, 0.1]})
    assert len(join_samples(captions, samples)) == 2
    with pytest.raises(ValueError, match="no samples"):
        join_samples(captions, samples.head(1), where="shard.parquet")
    with pytest.raises(ValueError, match="sampled twice"):
        join_samples(captions, pl.concat([samples, samples.head(1)]))
    with pytest.raises(ValueError, match="the caption table holds key 1 twice"):
        join_samples(pl.concat([captions, captions.tail(1)]), samples)
    for bad in (float("nan"), float("inf")):
        with pytest.raises(FloatingPointError, match="non-finite std at caption key 1"):
            join_samples(captions, samples.with_columns(pl.Series("std", [0.1, bad])))


@pytest.mark.parametrize("fraction", [0, -0.2, 2.0, float("nan"), True, "0.5"])
def test_image_subsets_refuse_a_fraction_outside_0_1(fraction):
    with pytest.raises(ValueError, match="fraction must lie in"):
        image_subsets(pl.Series(["a", "b"]), fraction, seed=0)


def test_intervals_without_a_valid_lambda_say_so():
    rng = np.random.default_rng(0)

    def frame(n):
        return pl.DataFrame(
            {
                "mean": rng.uniform(0.5, 1.0, n),
                "std": rng.uniform(0.01, 0.05, n),
                "human_score": rng.uniform(0, 1, n),
                "path": [f"image-{k // 4}.jpg" for k in range(n)],
            }
        )

    table, result = interval_metrics(
        frame(60),
        {"a": frame(40), "b": frame(30)},
        delta=0.05,
        lambdas=np.linspace(1, 5, 5),
        method="bonferroni",
        truncation_factor=1.8,
    )
    assert result is None
    assert (
        table.filter(pl.col("stage") == "pos")["ups"].is_nan().all()
        and table.filter(pl.col("stage") == "pre")["ups"].is_finite().all()
    )
    assert table["n"].to_list() == [40, 40, 30, 30]


def test_read_sampled_sets_pairs_each_table_with_its_own_shards(tmp_path):
    from condeval.crc.evaluate import read_sampled_sets

    paths = {}
    for name, offset in (("a", 0.0), ("b", 1.0)):  # the same keys in both sets, told apart by their files
        pl.DataFrame({"key": [0, 1], "labels": [[0], [1]]}).write_parquet(tmp_path / f"{name}.parquet")
        for shard, key in enumerate((0, 1)):
            pl.DataFrame(
                {"key": [key], "clipscore": [offset + key], "mean": [0.5], "std": [0.1], "samples": [[0.5]]}
            ).write_parquet(tmp_path / f"{name}-{shard}.parquet")
        paths[name] = [tmp_path / f"{name}-{shard}.parquet" for shard in (0, 1)]
    a, b = read_sampled_sets(
        [tmp_path / "a.parquet", tmp_path / "b.parquet"], paths["a"] + paths["b"], keep_distribution=False
    )
    assert (
        a["clipscore"].to_list() == [0.0, 1.0] and b["clipscore"].to_list() == [1.0, 2.0] and "samples" not in a.columns
    )
    with pytest.raises(ValueError, match="evenly"):
        read_sampled_sets([tmp_path / "a.parquet", tmp_path / "b.parquet"], paths["a"] + paths["b"][:1])


def test_a_sweep_refuses_an_image_on_both_sides_and_reports_the_image_risk_on_request():
    rng = np.random.default_rng(2)
    calibration = _captions(200, rng)
    with pytest.raises(ValueError, match="100 images have captions in both calibration and test"):
        risk_sweep(calibration, calibration, [0.3], delta=0.1, risk="fdr")
    # captions with a valid word past max_length are refused by risk_sweep itself, not only by the workflow
    test = _captions(200, rng, images="test")
    truncated = calibration.with_columns(truncated_words=pl.Series([1] * 20 + [0] * 180))
    kept = risk_sweep(truncated, test, [0.3], delta=0.1, risk="fdr")
    assert kept["n_calibration"][0] == 180
    assert kept.equals(risk_sweep(calibration.slice(20), test, [0.3], delta=0.1, risk="fdr"))
    # one image of one caption at FDR 0, one of three captions at FDR 0.5
    flags, labels = np.array([1, 1, 1, 1, 1, 1, 1]), np.array([1, 1, 0, 1, 0, 1, 0])
    groups, images = np.array([0, 1, 1, 2, 2, 3, 3]), np.array([0, 1, 1, 1, 1, 1, 1])
    assert fdr(flags, labels, groups) == pytest.approx(1.5 / 4)
    assert fdr(flags, labels, groups, images=images) == pytest.approx((0 + 0.5) / 2)


@pytest.mark.parametrize("column", ["mean", "word_scores"])
def test_a_non_finite_sample_names_its_shard_and_caption(tmp_path, column):
    """A NaN in a sample shard (a score, or one inside a list) stops the read naming the shard and the
    caption key; it named the caption table, which was sound, or (inside a list) passed to the metrics."""
    from condeval.crc.evaluate import read_sampled

    captions = tmp_path / "captions.parquet"
    pl.DataFrame({"key": [0, 1, 2], "words": [["a", "b"]] * 3}).write_parquet(captions)
    samples = pl.DataFrame(
        {
            "key": [0, 1, 2],
            "clipscore": [0.5, 0.6, 0.7],
            "mean": [0.5, 0.6, 0.7],
            "std": [0.1, 0.1, 0.1],
            "word_scores": [[0.1, 0.2]] * 3,
        }
    )
    good, bad = tmp_path / "shard-0.parquet", tmp_path / "shard-1.parquet"
    samples.head(2).write_parquet(good)
    broken = samples.tail(1)
    broken = broken.with_columns(
        pl.Series(column, [float("nan")] if column == "mean" else [[0.1, float("nan")]], dtype=broken.schema[column])
    )
    broken.write_parquet(bad)
    with pytest.raises(FloatingPointError, match=rf"shard-1\.parquet: non-finite {column} at caption key 2"):
        read_sampled(captions, [good, bad])


SET_METRICS = {
    "fdr": ("risk", "ap", "f1", "la", "la_set"),
    "fpr": ("risk", "ap", "f1", "precision", "recall", "word_f1"),
}


def _intervals(frame: pl.DataFrame, risk: str) -> dict[str, float]:
    return bootstrap_intervals(frame, 0.5, risk) | ap_interval(frame)


@pytest.mark.parametrize("risk", ["fdr", "fpr"])
def test_the_test_intervals_hold_the_estimates_and_resample_images_not_captions(risk):
    rng = np.random.default_rng(3)
    test = _captions(400, rng, images="test")
    bounds, point = _intervals(test, risk), set_metrics(test, 0.5, risk)
    assert {key.rsplit("_", 1)[0] for key in bounds} == set(SET_METRICS[risk])
    for metric in SET_METRICS[risk]:
        assert bounds[f"{metric}_low"] < point[metric] < bounds[f"{metric}_high"], metric
    # every caption of an image four times over: no new evidence, so intervals as wide (the same draws of
    # images); a bootstrap over captions would narrow them by about half
    copies = pl.concat([test.with_columns(pl.col("key") + k * len(test)) for k in range(4)])
    assert _intervals(copies, risk) == pytest.approx(bounds)
    # an image's captions are its unit: one image in two resamples' worth of captions is not two units
    assert np.isnan(bootstrap_intervals(test.filter(pl.col("path") == "test-0.jpg"), 0.5, risk)["risk_low"])


@pytest.mark.parametrize("risk", ["fdr", "fpr"])
def test_images_alike_give_intervals_of_no_width_at_the_reported_value(risk):
    # 20 images with the same 10 captions: every resample is the data again, so each interval is the
    # one value set_metrics reports, whatever the metric's formula
    captions = _captions(10, np.random.default_rng(5))
    alike = pl.concat(
        [captions.with_columns(pl.col("key") + 10 * k, pl.lit(f"image-{k}.jpg").alias("path")) for k in range(20)]
    )
    bounds, point = _intervals(alike, risk), set_metrics(alike, 0.5, risk)
    for metric in SET_METRICS[risk]:
        assert bounds[f"{metric}_low"] == pytest.approx(point[metric]) == bounds[f"{metric}_high"], metric


@pytest.mark.parametrize("risk", ["fdr", "fpr"])
def test_the_ap_and_f1_intervals_are_scikit_learns_metrics_on_the_same_draws(risk):
    # scores rounded to one decimal: ties between captions, which AP ranks as one threshold
    test = _captions(120, np.random.default_rng(8), images="test").with_columns(
        pl.col("word_scores").list.eval(pl.element().round(1))
    )
    scores, labels, groups = word_arrays(test)
    has_error, top, caption = caption_truth_and_score(scores, labels, groups)
    flagged = caption_counts(scores > 0.5, labels, groups)
    decision = flagged[0] + flagged[1] > 0
    image_of_caption = test["path"].rank("dense").cast(int).to_numpy() - 1  # one row per caption here
    assert len(image_of_caption) == len(top) and (caption == np.sort(caption)).all()
    n_images = int(image_of_caption.max()) + 1

    def sklearn_ap(counts):
        rows = resampled_rows(counts, image_of_caption)
        return average_precision_score(has_error[rows], top[rows])

    def sklearn_f1(counts):
        rows = resampled_rows(counts, image_of_caption)
        return f1_score(has_error[rows], decision[rows], average="macro", labels=[False, True])

    bounds = _intervals(test, risk)
    for metric, statistic in (("ap", sklearn_ap), ("f1", sklearn_f1)):
        expected = unit_bootstrap_interval(statistic, n_images)
        assert (bounds[f"{metric}_low"], bounds[f"{metric}_high"]) == pytest.approx(expected, abs=1e-12), metric


def test_a_sweep_reports_the_test_risks_interval_over_images():
    rng = np.random.default_rng(0)
    sweep = risk_sweep(_captions(400, rng), _captions(400, rng, images="test"), [0.3], delta=0.1, risk="fdr")
    row = sweep.row(0, named=True)
    assert row["test_risk_low"] <= row["test_risk"] <= row["test_risk_high"]
    assert row["test_f1_low"] <= row["test_f1"] <= row["test_f1_high"]


def _judgments(n: int, rng: np.random.Generator, pairs_per_image: int = 4) -> pl.DataFrame:
    """Human scores 1–4; CLIPScore means that track them, noisier where the sampled σ is larger (the
    judged pairs of test_intervals.py), ``pairs_per_image`` pairs an image."""
    human = rng.integers(1, 5, n).astype(float)
    std = rng.uniform(0.02, 0.3, n)
    mean = np.clip(0.35 * human + rng.normal(0, 3 * std), 0.05, 2.4)
    paths = [f"image-{k // pairs_per_image}.jpg" for k in range(n)]
    return pl.DataFrame({"mean": mean, "std": std, "human_score": human, "path": paths})


def test_table5_rows_carry_intervals_over_images_and_the_change_on_the_same_draws():
    calibration = _judgments(400, np.random.default_rng(0), pairs_per_image=1)
    evaluation = _judgments(400, np.random.default_rng(1))
    settings = {"delta": 0.05, "lambdas": PAPER_LAMBDAS, "method": "bonferroni", "truncation_factor": 1.8}
    table, result = interval_metrics(calibration, {"judged": evaluation}, **settings)
    assert result is not None and result.lambda_hat > 1
    pre, pos = table.sort("stage", descending=True).iter_rows(named=True)
    for row in (pre, pos):
        for key in ("ups", "tau_c"):
            assert row[f"{key}_low"] < row[key] < row[f"{key}_high"], (row["stage"], key)
    assert pos["ups_change"] == pytest.approx(pos["ups"] - pre["ups"])
    # paired on the same images, the change's interval is narrower than the two stages' intervals apart
    assert pos["ups_change_high"] - pos["ups_change_low"] < (pos["ups_high"] - pos["ups_low"]) + (
        pre["ups_high"] - pre["ups_low"]
    )
    # an image's pairs are its unit: each pair four times over in its image gives the same intervals
    copies = pl.concat([evaluation] * 4)
    again, _ = interval_metrics(calibration, {"judged": copies}, **settings)
    for got, want in zip(again.drop("n").iter_rows(named=True), table.drop("n").iter_rows(named=True), strict=True):
        assert got == pytest.approx(want, nan_ok=True)

"""The experiment layer: sweeps control the risk on held-out captions, the α pick, signal and joins."""
import numpy as np
import polars as pl
import pytest

from condeval.crc.evaluate import detection_signal, interval_metrics, join_samples, risk_sweep, select_alpha


def _captions(n: int, rng: np.random.Generator, separation: float = 2.0) -> pl.DataFrame:
    """Simulated captions: 3–8 words, half with one error; f_v = σ(separation·label + noise)."""
    rows = []
    for key in range(n):
        length = int(rng.integers(3, 9))
        labels = np.zeros(length, dtype=int)
        if rng.random() < 0.5:
            labels[rng.integers(length)] = 1
        scores = 1 / (1 + np.exp(-(separation * labels - 1 + rng.normal(0, 1, length))))
        rows.append({"key": key, "labels": labels.tolist(), "word_scores": scores.tolist()})
    return pl.DataFrame(rows, schema={"key": pl.Int64, "labels": pl.List(pl.Int64), "word_scores": pl.List(pl.Float64)})


@pytest.mark.parametrize("risk", ["fdr", "fpr"])
def test_a_sweep_controls_the_test_risk_and_loosens_with_alpha(risk):
    rng = np.random.default_rng(0)
    calibration, test = _captions(2000, rng), _captions(4000, rng)
    sweep = risk_sweep(calibration, test, [0.1, 0.2, 0.3], delta=0.05, risk=risk)
    assert (sweep["test_risk"] <= sweep["alpha"] + 0.01).all(), sweep  # the bound's slack: well below α + MC error
    assert (sweep["calibration_risk"] <= sweep["alpha"]).all()
    assert sweep["lambda_hat"].is_sorted(descending=True) and sweep["test_set_size"].is_sorted()
    assert sweep["test_set_size"][0] > 0.05  # not trivially empty sets
    best = sweep.sort("calibration_f1")["alpha"][-1]
    assert select_alpha(sweep) == best


def test_detection_signal_against_chance():
    frame = pl.DataFrame({"key": [0, 1, 2], "labels": [[0, 1, 0], [0, 0], [1, 0, 0, 0]],
                          "word_scores": [[0.2, 0.9, 0.0], [0.3, 0.4], [0.8, 0.1, 0.7, 0.0]],
                          "pos": [["ADJ", "NOUN", "DET"], ["NOUN", "VERB"], ["NOUN", "ADP", "NOUN", "DET"]]})  # fmt: skip
    signal = detection_signal(frame)
    assert signal["la"] == 1.0 and signal["ap"] == 1.0
    assert signal["ap_chance"] == pytest.approx(2 / 3)
    assert signal["la_chance"] == pytest.approx((1 / 2 + 1 / 2) / 2)  # valid words: NOUN, PROPN, NUM, VERB, ADJ, ADV
    assert signal["la_noun_chance"] == pytest.approx((1 / 1 + 1 / 2) / 2)
    flipped = frame.with_columns(pl.col("word_scores").list.eval(1 - pl.element()))
    assert detection_signal(flipped)["la"] < 1.0


def test_join_samples_refuses_gaps_duplicates_and_nan():
    captions = pl.DataFrame({"key": [0, 1], "labels": [[0], [1]]})
    samples = pl.DataFrame({"key": [0, 1], "clipscore": [0.5, 0.6], "mean": [0.4, 0.5], "std": [0.1, 0.1]})
    assert len(join_samples(captions, samples)) == 2
    with pytest.raises(ValueError, match="no samples"):
        join_samples(captions, samples.head(1), where="shard.parquet")
    with pytest.raises(ValueError, match="sampled twice"):
        join_samples(captions, pl.concat([samples, samples.head(1)]))
    with pytest.raises(FloatingPointError, match="NaN std at caption key 1"):
        join_samples(captions, samples.with_columns(pl.Series("std", [0.1, float("nan")])))


def test_intervals_without_a_valid_lambda_say_so():
    rng = np.random.default_rng(0)
    frame = lambda n: pl.DataFrame({"mean": rng.uniform(0.5, 1.0, n), "std": rng.uniform(0.01, 0.05, n), "human_score": rng.uniform(0, 1, n)})  # noqa: E731
    table, result = interval_metrics(frame(60), {"a": frame(40), "b": frame(30)}, delta=0.05, lambdas=np.linspace(1, 5, 5), method="bonferroni", truncation_factor=1.8)
    assert result is None
    assert table.filter(pl.col("stage") == "pos")["ups"].is_nan().all() and table.filter(pl.col("stage") == "pre")["ups"].is_finite().all()
    assert table["n"].to_list() == [40, 40, 30, 30]


def test_read_sampled_sets_pairs_each_table_with_its_own_shards(tmp_path):
    from condeval.crc.evaluate import read_sampled_sets

    paths = {}
    for name, offset in (("a", 0.0), ("b", 1.0)):  # the same keys in both sets, told apart by their files
        pl.DataFrame({"key": [0, 1], "labels": [[0], [1]]}).write_parquet(tmp_path / f"{name}.parquet")
        for shard, key in enumerate((0, 1)):
            pl.DataFrame({"key": [key], "clipscore": [offset + key], "mean": [0.5], "std": [0.1], "samples": [[0.5]]}).write_parquet(tmp_path / f"{name}-{shard}.parquet")
        paths[name] = [tmp_path / f"{name}-{shard}.parquet" for shard in (0, 1)]
    a, b = read_sampled_sets([tmp_path / "a.parquet", tmp_path / "b.parquet"], paths["a"] + paths["b"], keep_distribution=False)
    assert a["clipscore"].to_list() == [0.0, 1.0] and b["clipscore"].to_list() == [1.0, 2.0] and "samples" not in a.columns
    with pytest.raises(ValueError, match="evenly"):
        read_sampled_sets([tmp_path / "a.parquet", tmp_path / "b.parquet"], paths["a"] + paths["b"][:1])

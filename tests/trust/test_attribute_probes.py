"""The trust track's signal checks: probe accuracies with their intervals over exchangeable units."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from condeval.core.conformal import unit_mean_interval
from condeval.trust.signal import (
    attribute_probes,
    generated_attribute_accuracy,
    generated_signal_markdown,
    probe_markdown,
)


def _world(n: int, rng, signal: float = 1.5):
    attributes = np.stack([rng.integers(0, 2, n), rng.integers(0, 3, n)], axis=1)
    features = rng.normal(size=(n, 8))
    features[:, :2] += signal * attributes
    return features, attributes


def test_a_probes_interval_draws_a_wells_sites_together():
    """Sites of one well share its treatment and its effect: with the well as the unit the interval is
    wider than with every site its own, and both hold the accuracy."""
    rng = np.random.default_rng(0)
    wells = np.repeat(np.arange(24), 10)
    attributes = np.stack([rng.integers(0, 2, 24), rng.integers(0, 3, 24)], axis=1)[wells]
    features = rng.normal(size=(240, 8))
    features[:, :2] += attributes
    features += rng.normal(0, 1.0, size=(24, 8))[wells]  # a well effect
    by_site = attribute_probes(features, attributes, ["a", "b"], seed=0)
    by_well = attribute_probes(features, attributes, ["a", "b"], groups=wells, seed=0)
    for name in ("a", "b"):
        row = by_well[name]
        assert row["accuracy"] == by_site[name]["accuracy"]
        assert row["accuracy_low"] <= row["accuracy"] <= row["accuracy_high"]
        assert (
            row["accuracy_high"] - row["accuracy_low"] > by_site[name]["accuracy_high"] - by_site[name]["accuracy_low"]
        )
    table = probe_markdown({"dinov3": by_well}, "rxrx1")
    low, high = by_well["a"]["accuracy_low"], by_well["a"]["accuracy_high"]
    assert f"| {by_well['a']['accuracy']:.3f} ({low:.3f}, {high:.3f}) |" in table and "dinov3 (95% CI)" in table


def test_a_generators_accuracy_interval_draws_each_condition_whole():
    """Samples of one requested condition are one unit: the interval is unit_mean_interval's over the
    conditions, and the table gives it beside the shuffled baseline."""
    rng = np.random.default_rng(1)
    real, real_attributes = _world(300, rng)
    conditions = np.array([[0, 0], [0, 1], [1, 2], [1, 0], [0, 2], [1, 1]])
    requested = np.repeat(conditions, 30, axis=0)
    samples = rng.normal(size=(len(requested), 8))
    samples[:, :2] += 1.5 * requested
    seen = np.isin(np.arange(len(requested)) // 30, [0, 1, 2, 3])
    rows = generated_attribute_accuracy(real, real_attributes, samples, requested, seen, ["a", "b"], seed=0)
    seen_a = next(r for r in rows if r["attribute"] == "a" and r["conditions"] == "seen")
    assert seen_a["accuracy_low"] < seen_a["accuracy"] <= seen_a["accuracy_high"]
    from sklearn.linear_model import LogisticRegression

    from condeval.metrics import unit_rows

    read = LogisticRegression(max_iter=2000).fit(unit_rows(real), real_attributes[:, 0]).predict(unit_rows(samples))
    correct = (read == requested[:, 0])[seen]
    expected = unit_mean_interval(correct, np.arange(len(requested))[seen] // 30)
    assert (seen_a["accuracy_low"], seen_a["accuracy_high"]) == pytest.approx(expected)
    table = generated_signal_markdown(pl.DataFrame([{"variant": "v"} | row for row in rows]))
    assert f"{seen_a['accuracy']:.3f} ({seen_a['accuracy_low']:.3f}, {seen_a['accuracy_high']:.3f}); " in table

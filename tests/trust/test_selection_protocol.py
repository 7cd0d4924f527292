"""Section 5.1.1 end to end on Gaussian features with a known attribute structure: the trust-selected
samples of every condition have a lower KID than random subsets of the same size, unseen conditions
fall back to their nearest seen ones, and the summary's improvement and Spearman follow."""

import numpy as np
import polars as pl
import pytest

from condeval.core.conformal import mean_interval
from condeval.trust.evaluate import (
    KidReference,
    fit_and_score,
    select,
    selection_by_condition,
    selection_markdown,
    selection_summary,
)
from condeval.trust.filtering import KidSettings, SelectionProtocol

NAMES = ["a", "b"]
D = 16


def _features(attributes, rng, shift=0.0):
    """Real-like features: a common mean, one direction per attribute value, noise; ``shift`` breaks them."""
    axes = np.eye(D)
    base = 3 * axes[0] + 1.5 * attributes[:, :1] * axes[1] + 1.5 * attributes[:, 1:] * axes[2]
    return base + 0.4 * rng.normal(size=(len(attributes), D)) + shift * rng.normal(size=(len(attributes), D))


@pytest.fixture(scope="module")
def selection():
    rng = np.random.default_rng(0)
    seen = np.array([[0, 0], [1, 0], [0, 1]])
    conditions = np.array([[0, 0], [1, 0], [0, 1], [1, 1]])
    real_attributes = np.repeat(seen, 300, axis=0)
    reference_attributes = np.repeat(conditions, 60, axis=0)
    # each condition: 60 good samples and 40 broken ones, more broken where the condition is unseen
    sample_attributes = np.repeat(conditions, 100, axis=0)
    shift = np.tile(np.r_[np.zeros(60), np.full(40, 1.0)], 4) * np.repeat([1.0, 1.0, 1.0, 2.0], 100)
    samples = _features(sample_attributes, rng) + shift[:, None] * rng.normal(size=(400, D))
    scorer, scores = fit_and_score(_features(real_attributes, rng), real_attributes, samples, sample_attributes, NAMES)
    reference = KidReference(_features(reference_attributes, rng), reference_attributes, conditions, NAMES)
    rows = selection_by_condition(
        scores,
        samples,
        scorer.thresholds(0.95),
        reference,
        SelectionProtocol(n_random=5, min_real=20, kid=KidSettings(subset_size=40, n_subsets=5)),
    )
    return rows, shift


def test_trust_selection_beats_random_subsets_in_every_condition(selection):
    rows, _ = selection
    assert rows["skipped"].null_count() == 4
    assert (rows["kid_accepted"] < rows["kid_random"]).all(), rows
    assert (
        rows.filter((rows["a"] == 1) & (rows["b"] == 1))["fallback"].item() == 2
    )  # two seen conditions tied at distance 1
    assert rows.filter(rows["a"] + rows["b"] < 2)["fallback"].to_list() == [0, 0, 0]


def test_the_summary_row_and_its_table(selection):
    rows, _ = selection
    summary = selection_summary(rows)
    assert summary["conditions"] == 4 and 0 < summary["accept"] < 100
    expected = 100 * (rows["kid_random"].mean() - rows["kid_accepted"].mean()) / rows["kid_random"].mean()
    assert summary["improvement"] == pytest.approx(expected) and summary["improvement"] > 0
    assert summary["spearman"] > 0  # the unseen condition is the worst in trust and in KID
    markdown = selection_markdown([{"dataset": "toy", "regime": "held_out", "variant": "v"} | summary])
    assert "| toy | held_out | v | 4 |" in markdown


def test_the_official_aggregation_weights_each_conditions_improvement_by_its_accepted_samples(selection):
    """The official code averages the conditions' own improvements, weighted by how many samples each
    accepted; the ratio of the mean KIDs is another number, and the table names both."""
    rows, _ = selection
    kept = rows.filter(rows["skipped"].is_null())
    weights = (kept["accept"] * kept["n_generated"]).to_numpy()
    expected = 100 * np.average(kept["improvement"].to_numpy(), weights=weights)
    summary = selection_summary(rows)
    assert summary["improvement_official"] == pytest.approx(expected)
    assert summary["improvement_official"] != pytest.approx(summary["improvement"])
    markdown = selection_markdown([{"dataset": "toy", "regime": "held_out", "variant": "v"} | summary])
    assert (
        "the official code's (per condition, accepted-weighted; 95% CI)" in markdown
        and "ratio of mean KIDs" in markdown
    )
    low, high = summary["improvement_official_low"], summary["improvement_official_high"]
    assert f"| {expected:.1f} ({low:.1f}, {high:.1f}) | {summary['improvement']:.1f} ± " in markdown


def test_the_summarys_intervals_draw_whole_conditions(selection):
    """Accept%, both KIDs, both gains and Spearman each get a 95% interval over conditions: it holds the
    estimate, and a condition's samples counted twice over (the same conditions) leave it as it is."""
    rows, _ = selection
    summary = selection_summary(rows)
    for key in ("accept", "improvement_official", "kid_trust", "kid_random", "improvement"):
        assert summary[f"{key}_low"] < summary[key] < summary[f"{key}_high"], key
    kept = rows.filter(pl.col("skipped").is_null())
    assert (summary["kid_trust_low"], summary["kid_trust_high"]) == pytest.approx(
        mean_interval(kept["kid_accepted"].to_numpy())
    )
    markdown = selection_markdown([{"dataset": "toy", "regime": "held_out", "variant": "v"} | summary])
    kid = f"{summary['kid_trust']:.3f} ± {summary['kid_trust_std']:.3f} ({summary['kid_trust_low']:.3f}, "
    assert kid in markdown and "| KID (trust) ± sd (95% CI) |" in markdown
    doubled = rows.with_columns(pl.col("n_generated") * 2)
    again = selection_summary(doubled)
    for key in ("accept", "improvement_official"):
        assert again[f"{key}_low"] == pytest.approx(summary[f"{key}_low"]), key
        assert again[f"{key}_high"] == pytest.approx(summary[f"{key}_high"]), key
    # one condition is not two units: no interval
    single = selection_summary(rows.filter(pl.col("skipped").is_null()).head(1))
    assert single["improvement_official"] is not None and single["improvement_official_low"] is None


def test_accept_percent_counts_every_generated_sample_even_in_a_skipped_condition():
    """Three conditions accepting 50%, 5% and 5%: Accept% is 20 (the samples that pass), not the 50 of
    the one condition with enough accepted samples to run the KID protocol."""
    rng = np.random.default_rng(3)
    conditions = np.array([[0, 0], [1, 0], [0, 1]])
    sample_attributes = np.repeat(conditions, 100, axis=0)
    features = _features(sample_attributes, rng)
    shares = np.repeat([0.5, 0.05, 0.05], 100)
    trust = np.tile(np.arange(100) / 100, 3) - shares  # a sample passes when trust <= 0 - 1e-9
    thresholds = pl.DataFrame(
        {"a": conditions[:, 0], "b": conditions[:, 1], "threshold": [-1e-9] * 3, "n_real": [50] * 3}
    )
    scores = pl.DataFrame({"a": sample_attributes[:, 0], "b": sample_attributes[:, 1], "trust": trust})
    reference_attributes = np.repeat(conditions, 60, axis=0)
    reference = KidReference(_features(reference_attributes, rng), reference_attributes, conditions, NAMES)
    rows = selection_by_condition(
        scores,
        features,
        thresholds,
        reference,
        SelectionProtocol(n_random=3, min_real=20, kid=KidSettings(subset_size=20, n_subsets=3)),
    )
    assert rows["skipped"].null_count() == 1 and rows["accept"].to_list() == pytest.approx([0.5, 0.05, 0.05])
    summary = selection_summary(rows)
    assert summary["conditions"] == 1 and summary["accept"] == pytest.approx(20.0)
    kept = rows.filter(pl.col("skipped").is_null()).row(0, named=True)
    band = 100 * 1.96 * np.hypot(kept["kid_accepted_std"], kept["kid_random_std"]) / abs(kept["kid_random"])
    assert summary["band"] == pytest.approx(band)
    assert f"{summary['improvement']:.1f} ± {band:.1f}" in selection_markdown(
        [{"dataset": "d", "regime": "r", "variant": "v"} | summary]
    )


def _ablation(seed, precomputed=None, broken=None):
    """scorer_ablation on seen conditions (0,0), (1,0), (0,1) and the unseen (1,1); ``broken`` samples
    (a mask over each condition's 80) get extra noise; ``precomputed(scorer, real, attributes, scores)``
    builds the precomputed scorers. Returns the table."""
    from condeval.trust.evaluate import scorer_ablation

    rng = np.random.default_rng(seed)
    conditions = np.array([[0, 0], [1, 0], [0, 1], [1, 1]])
    real_attributes = np.repeat(conditions[:3], 200, axis=0)
    real = _features(real_attributes, rng)
    sample_attributes = np.repeat(conditions, 80, axis=0)
    samples = _features(sample_attributes, rng, shift=0.3 if broken is None else 0.0)
    if broken is not None:
        samples += np.tile(broken, 4)[:, None] * rng.normal(size=samples.shape)
    scorer, scores = fit_and_score(real, real_attributes, samples, sample_attributes, NAMES)
    reference_attributes = np.repeat(conditions, 60, axis=0)
    extra = precomputed(scorer, real, real_attributes, scores) if precomputed else None
    reference = KidReference(_features(reference_attributes, rng), reference_attributes, conditions, NAMES)
    table = scorer_ablation(
        scorer,
        (real, real_attributes),
        (samples, scores),
        samples,
        reference,
        SelectionProtocol(n_random=3, min_real=20, kid=KidSettings(subset_size=40, n_subsets=3)),
        precomputed=extra,
    )
    return table


def test_the_scorer_ablation_runs_every_scorer_under_the_same_protocol():
    table = _ablation(1, broken=np.r_[np.zeros(50), np.ones(30)])
    assert table["scorer"].to_list() == [
        "trust",
        "linear_probe_energy",
        "knn_per_attribute",
        "alpha_precision_distance",
        "realism_only",
        "faithfulness_only",
        "trust_realism_two_sided",
    ]
    trust = table.filter(table["scorer"] == "trust").row(0, named=True)
    assert trust["conditions"] == 4 and trust["improvement"] > 0
    assert table["accept"].is_not_null().all()


def test_trusts_variants_are_the_fitted_scorers_terms_and_the_other_realism():
    """The variants reuse the one fit: realism and faithfulness alone are its columns, and the other
    realism is what a scorer fitted with that option scores."""
    from condeval.trust import TrustScorer
    from condeval.trust.evaluate import trust_variants

    rng = np.random.default_rng(4)
    attributes = np.repeat(np.array([[0, 0], [1, 0], [0, 1], [1, 1]]), 60, axis=0)
    features = _features(attributes, rng)
    scorer = TrustScorer(seed=1).fit(features, attributes)
    variants = trust_variants(scorer, (features, attributes), (features[:40], attributes[:40]))
    scores = scorer.score(features[:40], attributes[:40])
    assert np.array_equal(variants["realism_only"][1], scores["realism"].to_numpy())
    two_sided = TrustScorer(seed=1, realism="two-sided").fit(features, attributes)
    np.testing.assert_allclose(
        variants["trust_realism_two_sided"][1], two_sided.score(features[:40], attributes[:40])["trust"].to_numpy()
    )
    assert scorer.realism == "one-sided"  # the fitted scorer itself is left as it was
    back = trust_variants(two_sided, (features, attributes), (features[:40], attributes[:40]))
    np.testing.assert_allclose(back["trust_realism_one_sided"][1], scores["trust"].to_numpy())


def _trust_itself(scorer, real, real_attributes, scores):
    return {"trust_again": (scorer.score(real, real_attributes)["trust"].to_numpy(), scores["trust"].to_numpy())}


def test_a_precomputed_scorer_goes_through_the_same_thresholds_and_subsets():
    """A precomputed scorer that is trust itself (the CLIP alignment's way in) reproduces trust's row."""
    rows = {row["scorer"]: row for row in _ablation(2, precomputed=_trust_itself).iter_rows(named=True)}
    assert {k: v for k, v in rows["trust_again"].items() if k != "scorer"} == {
        k: v for k, v in rows["trust"].items() if k != "scorer"
    }

    def truncated(*args):
        real_scores, sample_scores = _trust_itself(*args)["trust_again"]
        return {"trust_again": (real_scores[:5], sample_scores)}

    with pytest.raises(ValueError, match="trust_again"):
        _ablation(2, precomputed=truncated)


def test_score_agreement_is_the_per_sample_rank_correlation_with_post_generation():
    from condeval.trust.evaluate import score_agreement

    rng = np.random.default_rng(0)
    post = pl.DataFrame({c: rng.normal(size=50) for c in ("realism", "faithfulness", "trust")})
    same = score_agreement(post, post)
    assert same == pytest.approx({"rho_realism": 1.0, "rho_faithfulness": 1.0, "rho_trust": 1.0})
    flipped = score_agreement(post.with_columns(trust=-pl.col("trust")), post)
    assert flipped["rho_trust"] == pytest.approx(-1.0) and flipped["rho_realism"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="49 samples"):
        score_agreement(post.head(49), post)


def test_step_thresholds_read_the_calibration_rows_on_the_steps_path():
    """On the clean features themselves the per-step thresholds are the post-generation ones; on the same
    rows seen through noise they rise, so that a step's real rows pass at the nominal rate."""
    from condeval.trust.evaluate import step_thresholds

    rng = np.random.default_rng(4)
    attributes = np.repeat(np.array([[0, 0], [1, 0], [0, 1]]), 200, axis=0)
    real = _features(attributes, rng)
    scorer, _ = fit_and_score(real, attributes, real[:2], attributes[:2], NAMES)
    clean = step_thresholds(scorer, real, attributes)
    post = scorer.thresholds(0.95)
    assert clean.drop("threshold").equals(post.drop("threshold"))
    np.testing.assert_allclose(clean["threshold"], post["threshold"], atol=1e-4)
    noisy = step_thresholds(scorer, real + 0.3 * rng.normal(size=real.shape), attributes)
    assert (noisy["threshold"] > clean["threshold"]).all()
    with pytest.raises(ValueError, match="rows the scorer was fitted on"):
        step_thresholds(scorer, real[:100], attributes[:100])


def test_selection_by_condition_refuses_inputs_it_would_misalign():
    """A lab's own arrays: each used to fail with a numpy broadcast or index error, or a polars one."""
    rng = np.random.default_rng(1)
    conditions = np.array([[0, 0], [1, 0], [0, 1]])
    attributes = np.repeat(conditions, 40, axis=0)
    scorer, scores = fit_and_score(
        _features(attributes, rng), attributes, _features(attributes, rng), attributes, NAMES
    )
    reference = _features(attributes, rng)
    kid_features = _features(attributes, rng)
    with pytest.raises(ValueError, match="kid_features has 10 rows for 120 scored samples"):
        selection_by_condition(
            scores,
            kid_features[:10],
            scorer.thresholds(),
            KidReference(reference, attributes, conditions, NAMES),
            SelectionProtocol(n_random=2, min_real=5, kid=KidSettings(subset_size=10, n_subsets=2)),
        )
    for given, message in [
        ((reference, attributes[:, :1], conditions), "reference_attributes have 1 attributes; names give 2"),
        ((reference, attributes, np.array([[0, 0, 0]])), "conditions have 3 attributes; names give 2"),
    ]:
        with pytest.raises(ValueError, match=message):
            KidReference(*given, NAMES)
    # polars reference attributes and one condition as a 1-D row read as their arrays do
    protocol = SelectionProtocol(n_random=2, min_real=5, kid=KidSettings(subset_size=10, n_subsets=2))
    one = selection_by_condition(
        scores,
        kid_features,
        scorer.thresholds(),
        KidReference(reference, pl.DataFrame(attributes, schema=NAMES), [1, 0], NAMES),
        protocol,
    )
    both = selection_by_condition(
        scores, kid_features, scorer.thresholds(), KidReference(reference, attributes, conditions, NAMES), protocol
    )
    assert one.row(0) == both.row(1)
    # the ablation and the graded shift on a lab's own rows: an IndexError and a broadcast error before
    from condeval.trust.evaluate import graded_shift, scorer_ablation

    real = _features(attributes, rng)
    with pytest.raises(ValueError, match="real_features has 60 rows; the scorer was fitted on at least"):
        scorer_ablation(
            scorer,
            (real[:60], attributes[:60]),
            (kid_features, scores),
            kid_features,
            KidReference(reference, attributes, conditions, NAMES),
            protocol,
        )
    with pytest.raises(ValueError, match="support has 3 attributes; names give 2"):
        graded_shift(both, np.zeros((2, 3), np.int64), NAMES)
    with pytest.raises(ValueError, match=r"per_condition has no column\(s\) \['c'\]"):
        graded_shift(both, np.zeros((2, 3), np.int64), [*NAMES, "c"])
    assert graded_shift(both, conditions[:2], NAMES)["hamming"].to_list() == [0, 0, 1]


def test_select_runs_the_protocol_once_for_the_table_and_the_samples():
    """One function gives both scripts their rows, the table's row and each sample's decision, all from
    the same thresholds: a seen condition's share of accepted samples is its row's Accept."""
    rng = np.random.default_rng(3)
    conditions = np.array([[0, 0], [1, 0], [0, 1], [1, 1]])
    real_attributes = np.repeat(conditions[:3], 200, axis=0)
    sample_attributes = np.repeat(conditions, 60, axis=0)
    samples = _features(sample_attributes, rng, shift=0.3)
    scorer, scores = fit_and_score(_features(real_attributes, rng), real_attributes, samples, sample_attributes, NAMES)
    reference_attributes = np.repeat(conditions, 40, axis=0)
    reference = KidReference(_features(reference_attributes, rng), reference_attributes, conditions, NAMES)
    protocol = SelectionProtocol(n_random=2, min_real=20, kid=KidSettings(subset_size=20, n_subsets=2, seed=0))
    selected = select(scores, samples, scorer.thresholds(), reference, protocol)
    rows = selection_by_condition(scores, samples, scorer.thresholds(), reference, protocol)
    assert selected.per_condition.equals(rows) and selected.summary == selection_summary(rows)
    np.testing.assert_array_equal(selected.accepted, scorer.accept(samples, sample_attributes))
    for k, condition in enumerate(conditions[:3]):
        share = selected.accepted[(sample_attributes == condition).all(axis=1)].mean()
        assert share == pytest.approx(rows["accept"][k])

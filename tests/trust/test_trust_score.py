"""TrustScorer by its definition and its properties: an independent computation of every term on
Gaussian data with a known attribute structure, the P95 rule's coverage on fresh real samples, scores
that do not depend on the batch, the signs of realism and faithfulness, and the refusals."""

import numpy as np
import pytest
from sklearn.covariance import LedoitWolf

from condeval.trust import TrustScorer

VALUES = (2, 3, 2)  # values per attribute


def _world(n: int, seed: int, dim: int = 8, shift: float = 0.0):
    """Features whose mean moves with each attribute's value (separable effects), plus unit noise."""
    rng = np.random.default_rng(seed)
    effects = [np.random.default_rng(100 + k).normal(0, 1.5, (v, dim)) for k, v in enumerate(VALUES)]
    attributes = np.stack([rng.integers(0, v, n) for v in VALUES], axis=1)
    features = 3.0 + sum(effects[k][attributes[:, k]] for k in range(len(VALUES))) + rng.standard_normal((n, dim))
    return features + shift, attributes


def _reference(fit_x, fit_a, cal_x, cal_a, x, a, reg=1e-5):
    """The trust score written out term by term: full quadratic forms, explicit inverses."""
    unit = lambda m: m / np.linalg.norm(m, axis=1, keepdims=True)  # noqa: E731
    fz, cz, z = unit(fit_x), unit(cal_x), unit(x)
    mean = fz.mean(axis=0)
    precision = np.linalg.inv(LedoitWolf().fit(fz).covariance_ + reg * np.eye(fz.shape[1]))

    def energy(rows):
        return np.array([(r - mean) @ precision @ (r - mean) for r in rows])

    def margins(rows, attrs):
        out = np.zeros(attrs.shape)
        for k in range(attrs.shape[1]):
            values = np.unique(fit_a[:, k])
            means = {v: fz[fit_a[:, k] == v].mean(axis=0) for v in values}
            residuals = np.concatenate([fz[fit_a[:, k] == v] - means[v] for v in values])
            scatter = residuals.T @ residuals / len(fz)
            s = LedoitWolf().fit(residuals).shrinkage_
            d = fz.shape[1]
            pk = np.linalg.inv((1 - s) * scatter + s * np.trace(scatter) / d * np.eye(d) + reg * np.eye(d))
            for i, (r, want) in enumerate(zip(rows, attrs[:, k], strict=True)):
                e = {v: (r - means[v]) @ pk @ (r - means[v]) for v in values}
                out[i, k] = e[want] - min(e[v] for v in values if v != want)
        return out

    cal_e, cal_m = energy(cz), margins(cz, cal_a)
    realism = (energy(z) - cal_e.mean()) / cal_e.std(ddof=1)
    m = margins(z, a)
    faithfulness = np.mean(
        [(m[:, k] - cal_m[:, k].mean()) / cal_m[:, k].std(ddof=1) for k in range(m.shape[1])], axis=0
    )
    return realism, faithfulness, m


@pytest.mark.parametrize("calibration", [0.0, 0.25])
def test_every_term_matches_an_independent_computation(calibration):
    x, a = _world(900, seed=0)
    scorer = TrustScorer(calibration=calibration, seed=3).fit(x, a)
    cal = scorer.calibration_rows_
    fit = np.setdiff1d(np.arange(len(x)), cal) if calibration else cal
    assert calibration == 0 or abs(len(cal) - calibration * len(x)) < 30
    queries, asked = _world(200, seed=1, shift=0.3)
    realism, faithfulness, margins = _reference(x[fit], a[fit], x[cal], a[cal], queries, asked)
    scores = scorer.score(queries, asked)
    np.testing.assert_allclose(scores["realism"], realism, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(scores["faithfulness"], faithfulness, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(scores["trust"], realism + faithfulness, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(
        scores.select("margin_a0", "margin_a1", "margin_a2").to_numpy(), margins, rtol=1e-4, atol=1e-3
    )


def test_held_out_calibration_leaves_the_fit_alone():
    """The calibration rows z-score and threshold; moving them changes no fitted statistic."""
    x, a = _world(900, seed=0)
    scorer = TrustScorer(calibration=0.2).fit(x, a)
    moved = x.copy()
    moved[scorer.calibration_rows_] += 5.0
    other = TrustScorer(calibration=0.2).fit(moved, a)
    np.testing.assert_array_equal(scorer.calibration_rows_, other.calibration_rows_)
    np.testing.assert_allclose(scorer.mean_, other.mean_)
    np.testing.assert_allclose(scorer.precision_, other.precision_)
    assert scorer.energy_calibration_ != other.energy_calibration_
    calibration = scorer.calibration_
    assert abs(calibration["realism"].mean()) < 1e-9 and abs(calibration["realism"].std() - 1) < 1e-9


def test_the_p95_rule_keeps_about_95_percent_of_fresh_real_samples():
    x, a = _world(6000, seed=0, dim=16)
    scorer = TrustScorer(calibration=0.2).fit(x, a)
    fresh, asked = _world(24000, seed=7, dim=16)
    scores = (
        scorer.score(fresh, asked)
        .with_columns(a0=asked[:, 0], a1=asked[:, 1], a2=asked[:, 2])
        .join(scorer.thresholds(0.95), on=["a0", "a1", "a2"], maintain_order="left")
    )
    kept = (scores["trust"] <= scores["threshold"]).to_numpy()
    assert 0.93 <= kept.mean() <= 0.97, kept.mean()
    for condition in np.unique(asked, axis=0):
        rows = (asked == condition).all(axis=1)
        assert 0.85 <= kept[rows].mean() <= 1.0, (condition, kept[rows].mean())


def test_in_sample_calibration_under_covers_when_the_fit_overfits():
    """The official code's in-sample reading (calibration=0) sets the threshold on the rows it fitted:
    with few rows per dimension their energies are too small, and fresh real samples are rejected far
    more than 5% of the time. Held out, the rule keeps its level."""
    x, a = _world(400, seed=0, dim=64)
    fresh, asked = _world(8000, seed=5, dim=64)
    kept = {}
    for calibration in (0.0, 0.3):
        scorer = TrustScorer(calibration=calibration).fit(x, a)
        threshold = float(np.quantile(scorer.calibration_["trust"], 0.95))
        kept[calibration] = float((scorer.score(fresh, asked)["trust"] <= threshold).mean())
    assert kept[0.0] < 0.8 < 0.9 < kept[0.3], kept


def test_a_score_does_not_depend_on_its_batch():
    x, a = _world(900, seed=0, dim=32)
    scorer = TrustScorer().fit(x, a)
    queries, asked = _world(2500, seed=2, dim=32)
    together = scorer.score(queries, asked)
    alone = [scorer.score(queries[i : i + 1], asked[i : i + 1]) for i in range(0, 2500, 97)]
    shuffled = np.random.default_rng(0).permutation(2500)
    reordered = scorer.score(queries[shuffled], asked[shuffled])
    # the products run in float32, and OpenBLAS's sgemm may round a row by its place in the block (it
    # does on AVX2: 1e-7 here), so the same score is the same to float32 rounding; any batch statistic
    # would move it by orders of magnitude more
    for j, i in enumerate(range(0, 2500, 97)):
        np.testing.assert_allclose(alone[j].row(0), together.row(i), rtol=0, atol=1e-5)
    np.testing.assert_allclose(reordered.to_numpy(), together[shuffled].to_numpy(), rtol=0, atol=1e-5)


def test_realism_and_faithfulness_point_the_right_way():
    x, a = _world(3000, seed=0)
    scorer = TrustScorer().fit(x, a)
    queries, asked = _world(1000, seed=4)
    honest = scorer.score(queries, asked)
    wrong = asked.copy()
    wrong[:, 1] = (wrong[:, 1] + 1) % VALUES[1]  # request a value the sample does not show
    mislabelled = scorer.score(queries, wrong)
    assert (mislabelled["faithfulness"] > honest["faithfulness"]).mean() > 0.9
    assert (mislabelled["margin_a1"] > 0).mean() > 0.9 > (honest["margin_a1"] > 0).mean() + 0.5
    np.testing.assert_array_equal(mislabelled["realism"], honest["realism"])  # realism ignores the request
    far = scorer.score(queries + 4.0 * np.random.default_rng(1).standard_normal(queries.shape), asked)
    assert (far["realism"] > honest["realism"]).mean() > 0.9


def test_two_sided_realism_squares_the_z_score_and_penalises_over_typical_samples():
    """The official code's option: realism = z², so a sample sitting at the real mean (energy far
    below every real one) loses its bonus; the P95 rule still keeps about 95% of fresh real samples,
    as its thresholds are read from the calibration rows' squared scores."""
    x, a = _world(6000, seed=0, dim=16)
    one = TrustScorer(calibration=0.2).fit(x, a)
    two = TrustScorer(calibration=0.2, realism="two-sided").fit(x, a)
    fresh, asked = _world(12000, seed=7, dim=16)
    one_scores, two_scores = one.score(fresh, asked), two.score(fresh, asked)
    np.testing.assert_allclose(two_scores["realism"], one_scores["realism"] ** 2, rtol=1e-12)
    np.testing.assert_allclose(two_scores["faithfulness"], one_scores["faithfulness"], rtol=1e-12)
    np.testing.assert_allclose(two_scores["trust"], one_scores["realism"] ** 2 + one_scores["faithfulness"])
    thresholds = two.thresholds(0.95)
    joined = two_scores.with_columns(a0=asked[:, 0], a1=asked[:, 1], a2=asked[:, 2]).join(
        thresholds, on=["a0", "a1", "a2"], maintain_order="left"
    )
    assert 0.93 <= float((joined["trust"] <= joined["threshold"]).mean()) <= 0.97
    typical = x[:1]
    centre = one.mean_[None, :] * np.linalg.norm(x, axis=1).mean()  # the real mean: energy about 0
    at_mean = {name: float(s.score(centre, a[:1])["realism"][0]) for name, s in (("one", one), ("two", two))}
    real = {name: float(s.score(typical, a[:1])["realism"][0]) for name, s in (("one", one), ("two", two))}
    assert at_mean["one"] < real["one"] and at_mean["two"] > 1.0, (at_mean, real)
    with pytest.raises(ValueError, match="realism must be one of"):
        TrustScorer(realism="both")


def test_bad_input_is_refused_with_its_reason():
    x, a = _world(300, seed=0)
    scorer = TrustScorer().fit(x, a)
    with pytest.raises(ValueError, match="D = 9; the scorer was fitted on D = 8"):
        scorer.score(np.ones((2, 9)), a[:2])
    nan = x[:3].copy()
    nan[1, 2] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite values \\(first at row 1\\)"):
        scorer.score(nan, a[:3])
    unseen = a[:2].copy()
    unseen[0, 1] = 7
    with pytest.raises(ValueError, match="attribute 'a1' value 7 was never seen"):
        scorer.score(x[:2], unseen)
    with pytest.raises(TypeError, match="integers"):
        scorer.score(x[:2], a[:2].astype(float))
    with pytest.raises(ValueError, match="K = 2"):
        scorer.score(x[:2], a[:2, :2])
    with pytest.raises(ValueError, match="not fitted"):
        TrustScorer().score(x[:2], a[:2])
    with pytest.raises(ValueError, match="takes one value"):
        TrustScorer(names=["m", "s", "g"]).fit(x, np.zeros_like(a))


def test_a_labs_mistakes_are_refused_before_they_corrupt_a_score():
    """Each of these used to score or select silently wrong, or fail far from the cause (a lab's trial)."""
    import polars as pl
    import torch

    from condeval.trust.filtering import acceptance, accepted_mask

    x, a = _world(300, seed=0)
    names = ["m", "s", "g"]
    scorer = TrustScorer(names=names).fit(x, a)
    refusals = [
        # an attribute named like a score column overwrote the trust the thresholds are read from
        (lambda: TrustScorer(names=["trust", "s", "g"]).fit(x, a), ValueError, r"\['trust'\] are taken"),
        (lambda: TrustScorer(names=["m", "m", "g"]).fit(x, a), ValueError, r"distinct; \['m'\] repeat"),
        (lambda: TrustScorer(names="msg").fit(x, a), TypeError, "got the string 'msg'"),
        (lambda: TrustScorer(regularization=-1.0), ValueError, "regularization must be a finite ridge >= 0"),
        # the percent instead of the fraction: every threshold null, then a comparison with None
        (lambda: scorer.thresholds(95), ValueError, r"quantile must be a fraction in \(0, 1\]"),
        (lambda: TrustScorer().thresholds(), ValueError, "not fitted"),
        (lambda: accepted_mask(np.zeros(4), [[0.6, 1, 0]] * 4, scorer.thresholds(), names), TypeError, "integers"),
        (
            lambda: accepted_mask(np.zeros(4), a[:3], scorer.thresholds(), names),
            ValueError,
            "trust has 4 scores and attributes 3 rows",
        ),
        (
            lambda: accepted_mask(np.zeros(4), a[:4], scorer.thresholds().drop("g"), names),
            ValueError,
            r"thresholds have no column\(s\) \['g'\]",
        ),
        (
            lambda: acceptance(np.zeros(4), a[0], scorer.thresholds().drop("threshold"), names),
            ValueError,
            r"thresholds have no column\(s\) \['threshold'\]",
        ),
        (lambda: TrustScorer().fit(x, a, groups=[None] * len(x)), ValueError, "groups has a missing id at row 0"),
        (lambda: accepted_mask(np.zeros(4), a[:4, 0], scorer.thresholds(), names), ValueError, r"must be \(N, K\)"),
        (lambda: accepted_mask(np.zeros(4), a[:4], scorer.thresholds(), "m"), TypeError, "got the string 'm'"),
        # identical real rows: the z-scores divided by a zero spread (NaN trust)
        (lambda: TrustScorer().fit(np.tile(x[:1], (300, 1)), a), ValueError, "do not vary"),
    ]
    for call, error, message in refusals:
        with pytest.raises(error, match=message):
            call()
    # a value held out whole in the calibration rows was scored as another value by searchsorted
    rare = a.copy()
    rare[:, 1] = np.where(np.arange(len(a)) == 0, 1, 0) + np.where(np.arange(len(a)) % 2 == 1, 2, 0)
    with pytest.raises(ValueError, match="lies only in calibration rows"):
        TrustScorer(calibration=0.9, seed=1).fit(x, rare)
    # torch inputs with gradients, and no samples at all, score as plain arrays do
    scores = scorer.score(torch.tensor(x[:5], requires_grad=True), torch.tensor(a[:5]))
    assert scores.equals(scorer.score(x[:5], a[:5]))
    empty = scorer.score(np.zeros((0, 8)), np.zeros((0, 3), np.int64))
    assert empty.height == 0 and empty.columns == scores.columns
    assert isinstance(empty, pl.DataFrame)


def _wells(units: int, per_unit: int, seed: int, dim: int = 32, unit_sd: float = 3.0):
    """RxRx1-like rows: units (wells) of ``per_unit`` rows sharing a condition and a random offset."""
    rng = np.random.default_rng(seed)
    effects = [np.random.default_rng(100 + k).normal(0, 1.5, (v, dim)) for k, v in enumerate(VALUES)]
    unit_attributes = np.stack([rng.integers(0, v, units) for v in VALUES], axis=1)
    offsets = unit_sd * rng.standard_normal((units, dim))
    groups = np.repeat(np.arange(units), per_unit)
    attributes = unit_attributes[groups]
    features = 3.0 + sum(effects[k][attributes[:, k]] for k in range(len(VALUES))) + offsets[groups]
    return features + rng.standard_normal((len(groups), dim)), attributes, groups


def test_calibration_on_whole_units_keeps_the_level_where_rows_of_a_unit_are_alike():
    """Rows of one well are not exchangeable with rows of another: calibrating on rows whose wells the fit
    saw sets the threshold on familiar wells, and fresh wells pass far less than 95% of the time. Held out
    by well (``groups``), the rule keeps about its level."""
    x, a, wells = _wells(100, 10, seed=0)
    fresh, asked, _ = _wells(4000, 1, seed=7)
    kept = {}
    for name, groups in (("rows", None), ("wells", wells)):
        coverage = []
        for seed in range(3):
            scorer = TrustScorer(calibration=0.3, seed=seed).fit(x, a, groups=groups)
            threshold = float(np.quantile(scorer.calibration_["trust"], 0.95))
            coverage.append(float((scorer.score(fresh, asked)["trust"] <= threshold).mean()))
        kept[name] = np.mean(coverage)
    assert kept["rows"] < 0.75 < 0.85 < kept["wells"], kept
    held = np.unique(wells[scorer.calibration_rows_])
    assert not np.isin(wells[np.setdiff1d(np.arange(len(wells)), scorer.calibration_rows_)], held).any()
    with pytest.raises(ValueError, match="spans conditions"):
        TrustScorer().fit(x, a, groups=np.zeros(len(x), dtype=int))


def test_a_condition_too_small_for_a_calibration_row_is_named_in_the_log(caplog):
    import logging

    x, a = _world(600, seed=3)
    tiny = np.flatnonzero((a == a[0]).all(axis=1))[2:]  # leave that condition two rows: 20% of 2 rounds to 0
    keep = np.setdiff1d(np.arange(len(a)), tiny)
    with caplog.at_level(logging.WARNING):
        scorer = TrustScorer(calibration=0.2).fit(x[keep], a[keep])
    assert "1 support condition(s) too small to hold out a calibration row" in caplog.text
    assert scorer.thresholds().height == len(np.unique(a, axis=0)) - 1


def test_calibrate_on_the_fits_own_held_out_rows_reproduces_its_calibration():
    """The life cycle's calibrate is fit's calibration, given the same rows: same z-scores, same thresholds."""
    from polars.testing import assert_frame_equal

    x, a = _world(900, seed=4)
    fitted = TrustScorer(calibration=0.25, seed=1).fit(x, a)
    rows = fitted.calibration_rows_
    thresholds = fitted.thresholds(0.95)
    recalibrated = TrustScorer(calibration=0.25, seed=1).fit(x, a).calibrate(x[rows], a[rows])
    assert recalibrated.energy_calibration_ == fitted.energy_calibration_
    assert recalibrated.margin_calibration_ == fitted.margin_calibration_
    assert_frame_equal(recalibrated.thresholds(0.95), thresholds)
    assert recalibrated.calibration_rows_ is None


def test_a_labs_own_calibration_rows_set_the_z_scores_and_the_thresholds():
    """Fit on every training row, calibrate on a lab's held-out rows: fresh real rows pass at about the
    P95; calibrating on noisier rows moves the scale (the rows really are used)."""
    x, a = _world(1500, seed=5)
    held_x, held_a = _world(1500, seed=6)
    fresh_x, fresh_a = _world(3000, seed=7)
    scorer = TrustScorer(calibration=0).fit(x, a).calibrate(held_x, held_a)
    kept = scorer.accept(fresh_x, fresh_a)
    assert 0.91 < kept.mean() < 0.97
    in_sample = TrustScorer(calibration=0).fit(x, a)
    assert scorer.energy_calibration_ != in_sample.energy_calibration_
    noisy = held_x + np.random.default_rng(0).normal(size=held_x.shape)
    shifted = TrustScorer(calibration=0).fit(x, a).calibrate(noisy, held_a)
    assert shifted.energy_calibration_[0] > scorer.energy_calibration_[0]


def test_accept_keeps_what_the_thresholds_and_the_fallback_keep():
    from condeval.trust.filtering import accepted_mask

    x, a = _world(900, seed=8)
    scorer = TrustScorer(seed=2).fit(x, a)
    samples, requested = _world(300, seed=9, shift=0.05)
    trust = scorer.score(samples, requested)["trust"].to_numpy()
    expected = accepted_mask(trust, requested, scorer.thresholds(0.9), scorer.names_)
    np.testing.assert_array_equal(scorer.accept(samples, requested, quantile=0.9), expected)
    loose = scorer.thresholds(0.9).with_columns(threshold=np.inf)
    assert scorer.accept(samples, requested, thresholds=loose).all()


def test_calibration_units_are_counted_in_the_thresholds():
    x, a = _world(900, seed=10)
    held_x, held_a = _world(600, seed=11)
    _, condition = np.unique(held_a, axis=0, return_inverse=True)
    wells = condition * 1000 + np.arange(len(held_a)) // 3 % 5  # up to 5 wells per condition
    scorer = TrustScorer(calibration=0).fit(x, a).calibrate(held_x, held_a, groups=wells)
    thresholds = scorer.thresholds()
    assert (thresholds["n_units"] <= 5).all() and (thresholds["n_real"] > thresholds["n_units"]).all()
    n = thresholds["n_units"].to_numpy()
    np.testing.assert_allclose(thresholds["coverage"], (1 + (n - 1) * 0.95) / (n + 1))
    with pytest.raises(ValueError, match="spans conditions"):
        TrustScorer(calibration=0).fit(x, a).calibrate(held_x, held_a, groups=np.zeros(len(held_a)))
    with pytest.raises(ValueError, match="not fitted"):
        TrustScorer().calibrate(held_x, held_a)
    from condeval.trust.evaluate import step_thresholds

    with pytest.raises(ValueError, match="calibrated by calibrate"):
        step_thresholds(scorer, x, a)

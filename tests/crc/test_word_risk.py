"""Word-level risk control: the risk sweep against a per-caption loop, and the guarantee
P(risk of S_λ̂ ≤ α) ≥ 1 − δ over many calibration draws from a known population."""

import numpy as np
import pytest

from condeval.core.risk import hb_p_value
from condeval.crc.word_risk import WordRiskSettings, calibrate_threshold, min_calibration_units, set_risk_curve


def _captions(n, rng, errors_per_caption=1, separation=3.0, decimals=None):
    """FOIL-like captions of 4–11 words: error words score higher, by ``separation`` in logit."""
    lengths = rng.integers(4, 12, n)
    groups = np.repeat(np.arange(n), lengths)
    labels = np.zeros(len(groups), dtype=int)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    for k in range(errors_per_caption):
        labels[starts + (rng.integers(0, lengths) + k) % lengths] = 1
    logits = rng.normal(size=len(groups)) + separation * labels - separation / 2
    scores = 1 / (1 + np.exp(-logits))
    if decimals is not None:
        scores = np.round(scores, decimals)  # ties, within and across captions
    return scores, labels, groups


def _loop_risk(scores, labels, groups, lam, risk):
    losses = []
    for caption in np.unique(groups):
        s, y = scores[groups == caption], labels[groups == caption]
        flagged = s > lam
        false, true = np.sum(flagged & (y == 0)), np.sum(flagged & (y == 1))
        if risk == "fdr":
            losses.append(false / (false + true) if false + true else 0.0)
        else:
            losses.append(false / np.sum(y == 0) if np.sum(y == 0) else 0.0)
    return np.mean(losses)


@pytest.mark.parametrize("risk", ["fdr", "fpr"])
@pytest.mark.parametrize("decimals", [None, 1])
def test_risk_sweep_equals_a_loop_over_captions(risk, decimals):
    rng = np.random.default_rng(3)
    scores, labels, groups = _captions(40, rng, errors_per_caption=2, decimals=decimals)
    groups = np.array([f"caption-{g}" for g in groups])[rng.permutation(len(groups))]  # any ids, any order
    thresholds, risks, n = set_risk_curve(scores, labels, groups, risk)
    assert n == 40
    assert np.all(np.diff(thresholds) < 0)
    assert risks[0] == 0.0  # above every score: empty sets
    for lam, value in zip(thresholds, risks):
        assert value == pytest.approx(_loop_risk(scores, labels, groups, lam, risk), abs=1e-12)


def _population_risk(curve, lam):
    thresholds, risks, _ = curve
    return risks[np.searchsorted(-thresholds, -lam)]  # the curve is exact at every score


@pytest.mark.slow
@pytest.mark.parametrize("risk,alpha", [("fdr", 0.2), ("fpr", 0.1)])
def test_threshold_controls_the_risk_with_probability_one_minus_delta(risk, alpha):
    rng = np.random.default_rng(4)
    population = _captions(60_000, rng)
    curve = set_risk_curve(*population, risk)
    delta, draws, n_cal = 0.1, 300, 150
    caption_of = population[2]
    words_of = np.split(np.arange(len(caption_of)), np.flatnonzero(np.diff(caption_of)) + 1)
    exceed, recall, set_size = 0, [], []
    for _ in range(draws):
        words = np.concatenate([words_of[c] for c in rng.choice(len(words_of), n_cal, replace=False)])
        lam = calibrate_threshold(
            *(a[words] for a in population), WordRiskSettings(risk=risk, alpha=alpha, delta=delta, unit="caption")
        )
        exceed += _population_risk(curve, lam) > alpha
        scores, labels, _ = population
        recall.append(np.mean(scores[labels == 1] > lam))
        set_size.append(np.sum(scores > lam) / len(words_of))
    assert exceed / draws <= delta, exceed / draws
    # Not vacuous: the sets still find most errors.
    print(
        f"{risk}: P(risk > alpha) = {exceed / draws:.3f}, mean set size {np.mean(set_size):.2f} words, recall {np.mean(recall):.2f}"
    )
    assert np.mean(recall) > 0.5 and np.mean(set_size) > 0.5


def test_threshold_is_equation_7_on_a_non_monotone_risk():
    """Scores high → low: a false alarm, then three true errors. The FDR dips back under α after
    the false alarm, but Eq. 7 needs every λ' ≥ λ̂ controlled, so λ̂ stays above the false alarm."""
    rng = np.random.default_rng(5)
    n = 400
    groups = np.repeat(np.arange(n), 4)
    labels = np.tile([0, 1, 1, 1], n)
    scores = np.tile([0.9, 0.8, 0.7, 0.6], n)
    scores[labels == 0] = np.where(rng.uniform(size=n) < 0.5, 0.9, 0.1)  # half the captions: a top false alarm
    lam = calibrate_threshold(
        scores, labels, groups, WordRiskSettings(risk="fdr", alpha=0.2, delta=0.05, unit="caption")
    )
    thresholds, risks, _ = set_risk_curve(scores, labels, groups, "fdr")
    controlled = hb_p_value(risks, n, 0.2) <= 0.05
    assert controlled[thresholds >= lam].all()
    assert lam >= 0.9  # below 0.9 the false alarms enter with nothing to dilute them: FDR 0.5
    assert not controlled[thresholds < 0.9][0]
    assert controlled[thresholds < 0.6].any()  # the dip that brentq on a monotone-risk assumption could land in


def test_bad_input_is_refused():
    scores, labels, groups = _captions(30, np.random.default_rng(6))
    caption = dict(unit="caption")
    with pytest.raises(ValueError, match="differ in length"):
        calibrate_threshold(scores[:-1], labels, groups, WordRiskSettings(**caption))
    with pytest.raises(ValueError, match="NaN"):
        calibrate_threshold(
            np.where(np.arange(len(scores)) == 3, np.nan, scores), labels, groups, WordRiskSettings(**caption)
        )
    with pytest.raises(ValueError, match="labels must be 0"):
        calibrate_threshold(scores, labels * 2, groups, WordRiskSettings(**caption))
    with pytest.raises(ValueError, match="risk must be one of"):
        calibrate_threshold(scores, labels, groups, WordRiskSettings(risk="fnr", **caption))
    with pytest.raises(ValueError, match="1-D"):
        calibrate_threshold(scores[:, None], labels, groups, WordRiskSettings(**caption))
    few = groups < 10  # 10 captions: empty sets (risk 0) have p-value (1 − 0.2)^10 = 0.107 > δ
    with pytest.raises(ValueError, match="10 calibration captions are too few.*14 are needed"):
        calibrate_threshold(scores[few], labels[few], groups[few], WordRiskSettings(alpha=0.2, delta=0.05, **caption))


@pytest.mark.parametrize(
    "name,value", [("delta", 1.0), ("delta", 0.0), ("delta", np.nan), ("alpha", 1.0), ("alpha", 0.0), ("alpha", -0.1)]
)
def test_alpha_and_delta_outside_the_open_unit_interval_are_named(name, value):
    # δ = 1 used to return the threshold that flags every word; δ = 0 blamed too few captions.
    scores, labels, groups = _captions(300, np.random.default_rng(6))
    with pytest.raises(ValueError, match=f"{name} must lie in \\(0, 1\\)"):
        calibrate_threshold(scores, labels, groups, WordRiskSettings(unit="caption", **{name: value}))


def test_the_unit_is_checked():
    scores, labels, groups = _captions(300, np.random.default_rng(6))
    with pytest.raises(ValueError, match="unit='image' needs each word's image"):
        calibrate_threshold(scores, labels, groups)
    with pytest.raises(ValueError, match="unit must be one of"):
        calibrate_threshold(scores, labels, groups, WordRiskSettings(unit="pair"), images=groups // 2)
    images = groups // 2
    images[np.flatnonzero(groups == 3)[-1]] = 99  # the last word of caption 3 on another image
    with pytest.raises(ValueError, match="more than one image"):
        calibrate_threshold(scores, labels, groups, images=images)


def test_min_calibration_units_is_where_the_empty_set_first_passes():
    for alpha, delta in [(0.1, 0.05), (0.2, 0.05), (0.3, 0.1), (0.5, 0.01)]:
        n = min_calibration_units(alpha, delta)
        assert hb_p_value(0.0, n, alpha) <= delta < hb_p_value(0.0, n - 1, alpha)


def test_image_level_risk_averages_each_images_captions():
    rng = np.random.default_rng(8)
    scores, labels, groups = _captions(60, rng)
    images = groups // 3 + (groups >= 30) * 100  # captions 0–29 in threes, 30–59 in threes too, ids apart
    images[groups == 59] = 5000  # one image with a single caption
    thresholds, risks, n = set_risk_curve(scores, labels, groups, "fdr", images=images)
    image_of = {g: i for g, i in zip(groups, images)}
    assert n == len(set(image_of.values()))
    for lam, value in zip(thresholds[::7], risks[::7]):
        per_image = {}
        for caption in np.unique(groups):
            in_caption = groups == caption
            per_image.setdefault(image_of[caption], []).append(
                _loop_risk(scores[in_caption], labels[in_caption], groups[in_caption], lam, "fdr")
            )
        assert value == pytest.approx(np.mean([np.mean(v) for v in per_image.values()]), abs=1e-12)


def _correlated_images(n_images, captions_per_image, rng):
    """Each image's captions share one correct word's score (FPR is 1{score > λ}): R(λ) = 1 − λ."""
    shared = rng.uniform(size=n_images)
    noise = rng.normal(scale=0.01, size=(n_images, captions_per_image))
    scores = np.clip(shared[:, None] + noise, 0.0, 1.0).ravel()
    groups = np.arange(n_images * captions_per_image)
    return scores, np.zeros(len(scores), dtype=int), groups, groups // captions_per_image


@pytest.mark.slow
def test_image_unit_keeps_the_guarantee_that_correlated_captions_break():
    rng = np.random.default_rng(9)
    alpha, delta, draws = 0.2, 0.1, 400
    exceed = {"caption": 0, "image": 0}
    for _ in range(draws):
        scores, labels, groups, images = _correlated_images(50, 8, rng)  # 400 captions, 50 images
        for unit in exceed:
            lam = calibrate_threshold(
                scores, labels, groups, WordRiskSettings(risk="fpr", alpha=alpha, delta=delta, unit=unit), images=images
            )
            exceed[unit] += (1.0 - min(max(lam, 0.0), 1.0)) > alpha  # the population FPR, up to the noise's 0.01
    rates = {unit: count / draws for unit, count in exceed.items()}
    print(rates)
    assert rates["caption"] > delta + 0.1 and rates["image"] <= delta, rates


@pytest.mark.parametrize("risk", ["fdr", "fpr"])
@pytest.mark.parametrize("grid", [50, np.array([0.9, 0.1, 0.5, 0.3, 0.7, 0.95, 0.2])])
def test_grid_threshold_is_equation_7_over_the_grid(risk, grid):
    """On a grid, λ̂ is the smallest grid λ whose every larger grid λ has HB p ≤ δ (brute force)."""
    rng = np.random.default_rng(4)
    scores, labels, groups = _captions(300, rng, separation=2.0, decimals=2)
    values = np.sort(np.linspace(0, 1, grid) if np.ndim(grid) == 0 else grid)
    loop = np.array([_loop_risk(scores, labels, groups, lam, risk) for lam in values])
    thresholds, risks, _ = set_risk_curve(scores, labels, groups, risk, grid=grid)
    np.testing.assert_array_equal(thresholds, values[::-1])
    np.testing.assert_allclose(risks, loop[::-1], atol=1e-12)  # ties between scores and grid points included
    p = hb_p_value(loop, 300, 0.3)
    controlled_from = np.flatnonzero(np.concatenate([~(p[::-1] <= 0.1), [True]]))[
        0
    ]  # grid points from the top that pass
    expected = values[::-1][controlled_from - 1]
    assert (
        calibrate_threshold(
            scores, labels, groups, WordRiskSettings(risk=risk, alpha=0.3, delta=0.1, grid=grid, unit="caption")
        )
        == expected
    )


def test_alphas_too_small_for_the_calibration_set_are_refused_by_key():
    from condeval.crc.word_risk import check_alphas

    check_alphas([0.1, 0.3], 0.05, 29, "image", "foil_it")  # (0.9)^29 = 0.047 <= 0.05
    with pytest.raises(
        ValueError, match=r"config key 'crc.words.alphas': foil_it has 28 calibration images.*alpha 0.1 needs 29"
    ):
        check_alphas([0.1, 0.3], 0.05, 28, "image", "foil_it")


def test_bad_word_inputs_are_refused_by_name():
    rng = np.random.default_rng(0)
    scores, labels = rng.random(200), (rng.random(200) < 0.2).astype(int)
    groups, images = np.arange(200) // 4, (np.arange(200) // 8).astype(float)
    half_missing = images.copy()
    half_missing[:100] = np.nan
    infinite = scores.copy()
    infinite[7] = -np.inf
    for call, error, message in [
        (
            lambda: calibrate_threshold(scores, labels, groups, images=half_missing),
            ValueError,
            "images has a missing id at word 0",
        ),
        (
            lambda: calibrate_threshold(scores, labels, [None, *groups[1:]], WordRiskSettings(unit="caption")),
            ValueError,
            "groups has a missing id",
        ),
        (
            lambda: calibrate_threshold(
                scores, labels, np.array([1, "a", *groups[2:]], dtype=object), WordRiskSettings(unit="caption")
            ),
            TypeError,
            "groups must hold ids of one sortable type",
        ),
        (
            lambda: calibrate_threshold(scores, labels, groups, WordRiskSettings(alpha=None, unit="caption")),
            TypeError,
            "alpha must be a number",
        ),
        (
            lambda: calibrate_threshold(infinite, labels, groups, WordRiskSettings(unit="caption")),
            ValueError,
            "word 7 is infinite",
        ),
        (
            lambda: calibrate_threshold(["abc"] * 200, labels, groups, WordRiskSettings(unit="caption")),
            TypeError,
            "scores must be real numbers; got dtype <U3",
        ),
        (
            lambda: calibrate_threshold(scores, labels, groups, WordRiskSettings(grid=1, unit="caption")),
            ValueError,
            "grid must be a count of at least 2",
        ),
        (
            lambda: calibrate_threshold(scores, labels, groups, WordRiskSettings(grid=True, unit="caption")),
            ValueError,
            "grid must be a count",
        ),
        (
            lambda: calibrate_threshold(scores, labels, groups, WordRiskSettings(grid=2.5, unit="caption")),
            ValueError,
            "grid must be a count",
        ),
        (
            lambda: calibrate_threshold(3 * scores + 5, labels, groups, WordRiskSettings(grid=100, unit="caption")),
            ValueError,
            "largest grid λ",
        ),
    ]:
        with pytest.raises(error, match=message):
            call()


def test_flags_and_a_string_level_are_refused_not_calibrated():
    """scores > 0.5 (flags) calibrated to lambda = 1.0 and alpha "0.5" was read as 0.5."""
    rng = np.random.default_rng(0)
    scores, labels, groups = rng.random(200), rng.integers(0, 2, 200), np.repeat(np.arange(40), 5)
    with pytest.raises(TypeError, match="scores must be real numbers; got dtype bool"):
        calibrate_threshold(scores > 0.5, labels, groups, WordRiskSettings(unit="caption"))
    with pytest.raises(TypeError, match="alpha must be a number in"):
        calibrate_threshold(scores, labels, groups, WordRiskSettings(alpha="0.5", unit="caption"))


def test_word_risk_control_is_the_threshold_in_a_life_cycle():
    """WordRiskControl.calibrate sets the same λ̂ as the function under it; flag and risk read it; on
    fresh captions of the same world the realised per-image FDR stays under α."""
    from condeval.crc import WordRiskControl
    from condeval.crc.word_risk import WordRiskSettings, calibrate_threshold

    def world(n_captions, seed):
        rng = np.random.default_rng(seed)
        captions = np.repeat(np.arange(n_captions), 6)
        labels = (rng.random(len(captions)) < 0.2).astype(int)
        scores = np.clip(0.35 * labels + rng.normal(0.4, 0.15, len(captions)), 0, 1)
        return scores, labels, captions, captions // 3

    scores, labels, captions, images = world(3000, 0)
    control = WordRiskControl(risk="fdr", alpha=0.25, delta=0.05).calibrate(scores, labels, captions, images)
    assert control.threshold_ == calibrate_threshold(
        scores, labels, captions, WordRiskSettings(risk="fdr", alpha=0.25, delta=0.05), images=images
    )
    assert control.n_units_ == 1000
    fresh = world(3000, 1)
    np.testing.assert_array_equal(control.flag(fresh[0]), fresh[0] > control.threshold_)
    assert not control.flag([control.threshold_]).any()  # S_λ flags the scores strictly above λ
    assert 0 < control.risk(*fresh) <= 0.25
    by_caption = WordRiskControl(alpha=0.25, unit="caption").calibrate(scores, labels, captions)
    assert by_caption.n_units_ == 3000 and by_caption.threshold_ <= control.threshold_  # more units, tighter
    with pytest.raises(ValueError, match="not calibrated"):
        WordRiskControl().flag(scores)
    with pytest.raises(ValueError, match="risk must be one of"):
        WordRiskControl(risk="fnr")
    with pytest.raises(ValueError, match="unit must be one of"):
        WordRiskControl(unit="pair")

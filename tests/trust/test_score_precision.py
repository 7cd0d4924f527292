"""TrustScorer's scores keep their precision at the paper's feature width when every feature shares a
strong common direction (as ViT features do): the within-value precision then has eigenvalues near the
``1/1e-5`` ridge, ``μ_kvᵀ P_k μ_kv`` is about 1e5, and a margin written as the difference of two such
terms loses its digits to cancellation in float32. The scores are checked against the paper's formulas
written out in float64 (full quadratic forms with the fitted statistics), and the calibration rows,
scored again through :meth:`TrustScorer.score`, must give back the scorer's own calibration."""

import numpy as np
import pytest

from condeval.trust import TrustScorer

DIM = 768
VALUES = (2, 3, 2)  # values per attribute: a three-valued one exercises the min over the other values
NAMES = [f"a{k}" for k in range(len(VALUES))]
MARGINS = [f"margin_{name}" for name in NAMES]


def _world(n: int, seed: int):
    """A large common vector (the same for every row) plus small anisotropic noise and attribute effects."""
    structure = np.random.default_rng(0)
    common = 5.0 * structure.standard_normal(DIM)
    basis = np.linalg.qr(structure.standard_normal((DIM, DIM)))[0]
    scales = np.arange(1, DIM + 1) ** -0.75  # a decaying spectrum: low effective rank
    effects = [0.3 * structure.standard_normal((v, DIM)) for v in VALUES]
    rng = np.random.default_rng(seed)
    attributes = np.stack([rng.integers(0, v, n) for v in VALUES], axis=1)
    noise = (rng.standard_normal((n, DIM)) * scales) @ basis.T
    features = common + noise + sum(effects[k][attributes[:, k]] for k in range(len(VALUES)))
    return features.astype(np.float32), attributes


def _energies(scorer: TrustScorer, features: np.ndarray, attributes: np.ndarray):
    """(realism energy (N,), margins (N, K)) in float64, as the paper writes them: full quadratic forms
    ``(z − m)ᵀ P (z − m)`` of the unit rows with the fitted means and precisions, no identity used."""
    z = features.astype(np.float64)
    z /= np.linalg.norm(z, axis=1, keepdims=True)

    def quadratic(centre, precision):
        centred = z - centre
        return ((centred @ precision) * centred).sum(axis=1)

    energy = quadratic(scorer.mean_, scorer.precision_)
    margins = np.empty(attributes.shape)
    rows = np.arange(len(z))
    for k, (values, means, precision) in enumerate(
        zip(scorer.values_, scorer.value_means_, scorer.attribute_precisions_, strict=True)
    ):
        per_value = np.stack([quadratic(mean, precision) for mean in means], axis=1)  # (N, V)
        requested = np.searchsorted(values, attributes[:, k])
        others = per_value.copy()
        others[rows, requested] = np.inf
        margins[:, k] = per_value[rows, requested] - others.min(axis=1)
    return energy, margins


@pytest.fixture(scope="module")
def fitted():
    features, attributes = _world(3000, seed=1)
    scorer = TrustScorer(calibration=0.2, seed=0).fit(features, attributes)
    return scorer, features, attributes


def test_scores_at_width_768_with_a_shared_direction_match_float64(fitted):
    scorer, features, attributes = fitted
    rows = scorer.calibration_rows_
    calibration_energy, calibration_margins = _energies(scorer, features[rows], attributes[rows])
    # the regime the test is about: μᵀPμ near the ridge's 1e5, margins a few units wide
    assert max(float(m @ scorer.attribute_precisions_[0] @ m) for m in scorer.value_means_[0]) > 1e4

    queries, asked = _world(2000, seed=2)
    asked[::3] = np.random.default_rng(3).integers(0, VALUES, (len(asked[::3]), len(VALUES)))  # some mismatched
    energy, margins = _energies(scorer, queries, asked)
    realism = (energy - calibration_energy.mean()) / calibration_energy.std(ddof=1)
    standardised = (margins - calibration_margins.mean(axis=0)) / calibration_margins.std(axis=0, ddof=1)
    faithfulness = standardised.mean(axis=1)

    scores = scorer.score(queries, asked)
    spread = calibration_margins.std(axis=0, ddof=1)  # the scale the margins are z-scored on
    margin_error = np.abs(scores.select(MARGINS).to_numpy() - margins).max(axis=0) / spread
    assert (margin_error < 1e-3).all(), f"margin error / margin SD: {margin_error}"
    np.testing.assert_allclose(scores["realism"], realism, rtol=0, atol=1e-3)
    np.testing.assert_allclose(scores["faithfulness"], faithfulness, rtol=0, atol=1e-3)
    np.testing.assert_allclose(scores["trust"], realism + faithfulness, rtol=0, atol=1e-3)


def test_scoring_the_calibration_rows_gives_back_the_calibration(fitted):
    scorer, features, attributes = fitted
    rows = scorer.calibration_rows_
    rescored = scorer.score(features[rows], attributes[rows])
    calibration = scorer.calibration_
    margins = rescored.select(MARGINS).to_numpy()
    spread = np.array([s for _, s in scorer.margin_calibration_])
    margin_error = np.abs(margins - calibration.select(MARGINS).to_numpy()).max(axis=0) / spread
    assert (margin_error < 1e-3).all(), f"margin error / margin SD: {margin_error}"
    for column in ("realism", "faithfulness", "trust"):
        np.testing.assert_allclose(rescored[column], calibration[column], rtol=0, atol=1e-3, err_msg=column)
    # and the statistics the z-scores were set with
    np.testing.assert_allclose(
        margins.mean(axis=0), [m for m, _ in scorer.margin_calibration_], rtol=0, atol=1e-4 * spread.min()
    )
    np.testing.assert_allclose(margins.std(axis=0, ddof=1), spread, rtol=1e-4)
    assert abs(rescored["realism"].mean()) < 1e-4 and abs(rescored["realism"].std() - 1) < 1e-4
    assert abs(rescored["faithfulness"].mean()) < 1e-4

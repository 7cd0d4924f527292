"""The scorer ablation (Appendix J): per-sample scores that stand in for trust under the same P95
protocol, each fitted on the same real features (L2-normalised inside), lower is better.

- :class:`LinearProbeEnergy`: one scikit-learn logistic regression per attribute; a sample scores the
  sum over attributes of the free energy ``−logsumexp(logits)`` (label-agnostic, as the official code;
  a binary attribute's logits are ``(0, decision)``).
- :class:`KnnPerAttribute`: per attribute, the cosine distance from the sample to its ``k``-th (5th)
  nearest neighbour among the real rows showing the requested value, summed over attributes
  (scikit-learn's ``NearestNeighbors``).
- :class:`AlphaPrecisionDistance`: α-Precision's geometry (Alaa et al., 2022): the distance to the centre
  of the real features. α-Precision is the share of samples inside the real ``α``-quantile ball; as a
  per-sample score the distance itself. It is reference-based: it assumes the real rows it is fitted
  on represent the target, which under compositional shift they do not (the unseen condition has no
  real rows in the fit).
- A CLIP alignment score (``−cos`` of the sample's CLIP image embedding and its condition's prompt)
  needs a CLIP and prompts per condition; it is :func:`clip_alignment`.

Every scorer has ``fit(features, attributes)`` and ``score(features, attributes) -> ndarray``, so
:func:`condeval.trust.filtering.condition_thresholds` sets their P95-real thresholds as for trust.
"""

from __future__ import annotations

import numpy as np

from condeval.core.conformal import empirical_quantile
from condeval.core.io import check_finite, real_array
from condeval.metrics import unit_rows
from condeval.trust.checks import attribute_rows

__all__ = [
    "ALPHAS",
    "LinearProbeEnergy",
    "KnnPerAttribute",
    "AlphaPrecisionDistance",
    "alpha_precision",
    "clip_alignment",
    "clip_alignment_scores",
]

#: The α grid of an α-Precision curve.
ALPHAS = tuple(np.linspace(0.0, 1.0, 11))


def _rows(features, attributes=None):
    """Unit-normalised finite features (N, D) and, when given, integer attribute rows (N, K), checked
    as TrustScorer checks its own (a NaN row would score NaN, 0.6 be read as value 0)."""
    z = unit_rows(check_finite(real_array(features, "features", ndim=2), "features"))
    return z if attributes is None else (z, attribute_rows(attributes, len(z)))


class LinearProbeEnergy:
    """Summed per-attribute free energy of logistic-regression probes (lower is better)."""

    def __init__(self, max_iter: int = 1000):
        self.max_iter = max_iter

    def fit(self, features, attributes) -> LinearProbeEnergy:
        from sklearn.linear_model import LogisticRegression

        z, attributes = _rows(features, attributes)
        self.probes_ = [
            LogisticRegression(max_iter=self.max_iter).fit(z, attributes[:, k]) for k in range(attributes.shape[1])
        ]
        return self

    def score(self, features, attributes=None) -> np.ndarray:
        from scipy.special import logsumexp

        z = _rows(features)
        total = np.zeros(len(z))
        for probe in self.probes_:
            logits = probe.decision_function(z)
            if logits.ndim == 1:
                logits = np.stack([np.zeros_like(logits), logits], axis=1)
            total -= logsumexp(logits, axis=1)
        return total


class KnnPerAttribute:
    """Cosine distance to the ``k``-th nearest real row showing each requested value, summed over attributes."""

    def __init__(self, k: int = 5):
        self.k = k

    def fit(self, features, attributes) -> KnnPerAttribute:
        from sklearn.neighbors import NearestNeighbors

        z, attributes = _rows(features, attributes)
        self.indexes_ = []
        for k in range(attributes.shape[1]):
            per_value = {}
            for value in np.unique(attributes[:, k]):
                rows = z[attributes[:, k] == value]
                if len(rows) < self.k:
                    raise ValueError(f"attribute {k} value {value}: {len(rows)} real rows, fewer than k = {self.k}")
                per_value[int(value)] = NearestNeighbors(n_neighbors=self.k, metric="cosine").fit(rows)
            self.indexes_.append(per_value)
        return self

    def score(self, features, attributes) -> np.ndarray:
        z, attributes = _rows(features, attributes)
        total = np.zeros(len(z))
        for k, per_value in enumerate(self.indexes_):
            for value in np.unique(attributes[:, k]):
                if int(value) not in per_value:
                    raise ValueError(f"attribute {k} value {value} was never seen in the fit")
                rows = attributes[:, k] == value
                distances, _ = per_value[int(value)].kneighbors(z[rows])
                total[rows] += distances[:, -1]
        return total


class AlphaPrecisionDistance:
    """Distance to the real features' centre (α-Precision's geometry), label-agnostic."""

    def fit(self, features, attributes=None) -> AlphaPrecisionDistance:
        z = _rows(features)
        self.centre_ = z.mean(axis=0)
        self.real_distances_ = np.linalg.norm(z - self.centre_, axis=1)
        return self

    def score(self, features, attributes=None) -> np.ndarray:
        return np.linalg.norm(_rows(features) - self.centre_, axis=1)


def alpha_precision(scorer: AlphaPrecisionDistance, features, alphas=ALPHAS) -> np.ndarray:
    """α-Precision: for each α, the share of samples within the ``α``-quantile of the real distances."""
    radii = empirical_quantile(scorer.real_distances_, np.asarray(alphas))
    return (scorer.score(features)[:, None] <= radii[None, :]).mean(axis=0)


def clip_alignment(image_embeddings: np.ndarray, prompt_embeddings: np.ndarray, condition_index: np.ndarray):
    """``−cos(image, prompt of its condition)`` per sample (lower is better).

    Parameters
    ----------
    image_embeddings : ndarray, shape (N, E)
        The samples' CLIP image embeddings (after the visual projection).
    prompt_embeddings : ndarray, shape (C, E)
        One CLIP text embedding per condition (e.g. "a photo of a smiling man with blond hair ...").
    condition_index : ndarray of int, shape (N,)
        Each sample's row in ``prompt_embeddings``.
    """
    from condeval.metrics import cosine_similarity

    return -cosine_similarity(np.asarray(image_embeddings), np.asarray(prompt_embeddings)[condition_index])


def clip_alignment_scores(clip, *groups) -> tuple[np.ndarray, ...]:
    """:func:`clip_alignment` of each group of image embeddings against its conditions' prompts.

    Parameters
    ----------
    clip : condeval.encoders.features.ClipEncoder
        Its text tower embeds :func:`condeval.datasets.celeba_prompts.condition_prompts` (CelebA's conditions).
    *groups : tuple of (ndarray (N, E), ndarray of int (N, 4))
        Image embeddings and the condition each is scored against (a real row's own, a sample's requested).

    Returns
    -------
    tuple of ndarray
        One score array per group, lower is better.
    """
    from condeval.datasets.celeba_prompts import condition_prompts

    conditions, index = np.unique(np.vstack([attributes for _, attributes in groups]), axis=0, return_inverse=True)
    prompts = clip.text_features(condition_prompts(conditions))
    bounds = np.cumsum([0] + [len(attributes) for _, attributes in groups])
    return tuple(
        clip_alignment(images, prompts, index.ravel()[start:stop])
        for (images, _), start, stop in zip(groups, bounds[:-1], bounds[1:], strict=True)
    )

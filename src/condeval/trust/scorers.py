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
    """Summed per-attribute free energy of logistic-regression probes (lower is better).

    Examples
    --------
    >>> import numpy as np
    >>> from condeval.trust import LinearProbeEnergy
    >>> rng = np.random.default_rng(0)
    >>> attributes = rng.integers(0, 2, (200, 2))                  # two binary attributes per real row
    >>> features = np.hstack([2.0 * attributes - 1, np.ones((200, 1))]) + rng.normal(0, 0.3, (200, 3))
    >>> scorer = LinearProbeEnergy().fit(features, attributes)
    >>> energy = scorer.score([[1.0, -1.0, 1.0], [0.0, 0.0, 1.0]])  # clear values, then on both boundaries
    >>> [round(float(e), 2) for e in energy], bool(energy[0] < energy[1])
    ([-3.39, -1.48], True)
    """

    def __init__(self, max_iter: int = 1000):
        self.max_iter = max_iter

    def fit(self, features, attributes) -> LinearProbeEnergy:
        from sklearn.linear_model import LogisticRegression

        z, attributes = _rows(features, attributes)
        for k in range(attributes.shape[1]):
            if len(np.unique(attributes[:, k])) < 2:
                raise ValueError(
                    f"attribute {k} takes one value ({attributes[0, k]}) in every real row: a probe needs two"
                )
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
    """Cosine distance to the ``k``-th nearest real row showing each requested value, summed over attributes.

    Examples
    --------
    >>> import numpy as np
    >>> from condeval.trust import KnnPerAttribute
    >>> rng = np.random.default_rng(0)
    >>> attributes = rng.integers(0, 2, (200, 2))
    >>> features = np.hstack([2.0 * attributes - 1, np.ones((200, 1))]) + rng.normal(0, 0.3, (200, 3))
    >>> scorer = KnnPerAttribute(k=5).fit(features, attributes)
    >>> sample = [[1.0, -1.0, 1.0], [1.0, -1.0, 1.0]]               # one sample, requested as (1, 0) and (0, 1)
    >>> scorer.score(sample, [[1, 0], [0, 1]]).round(3).tolist()
    [0.006, 0.944]
    >>> scorer.score(sample[:1], [[2, 0]])
    Traceback (most recent call last):
    ...
    ValueError: attribute 0 value 2 was never seen in the fit
    """

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
        if attributes.shape[1] != len(self.indexes_):
            raise ValueError(f"attributes have {attributes.shape[1]} columns; the fit had {len(self.indexes_)}")
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
    """Distance to the real features' centre (α-Precision's geometry), label-agnostic.

    Examples
    --------
    >>> import numpy as np
    >>> from condeval.core.conformal import empirical_quantile
    >>> from condeval.trust import AlphaPrecisionDistance
    >>> rng = np.random.default_rng(0)
    >>> scorer = AlphaPrecisionDistance().fit(rng.normal(0, 1, (200, 4)) + 2)
    >>> distances = scorer.score([[2.0, 2.0, 2.0, 2.0], [-2.0, 2.0, 2.0, 2.0]])   # typical, then off-support
    >>> distances.round(3).tolist()
    [0.098, 0.964]
    >>> (distances <= empirical_quantile(scorer.real_distances_, 0.95)).tolist()   # inside the real P95 ball
    [True, False]
    """

    def fit(self, features, attributes=None) -> AlphaPrecisionDistance:
        z = _rows(features)
        self.centre_ = z.mean(axis=0)
        self.real_distances_ = np.linalg.norm(z - self.centre_, axis=1)
        return self

    def score(self, features, attributes=None) -> np.ndarray:
        return np.linalg.norm(_rows(features) - self.centre_, axis=1)


def alpha_precision(scorer: AlphaPrecisionDistance, features, alphas=ALPHAS) -> np.ndarray:
    """α-Precision: for each α, the share of samples within the ``α``-quantile of the real distances.

    Examples
    --------
    >>> import numpy as np
    >>> from condeval.trust import AlphaPrecisionDistance, alpha_precision
    >>> rng = np.random.default_rng(0)
    >>> real = rng.normal(0, 1, (300, 4)) + 2
    >>> scorer = AlphaPrecisionDistance().fit(real[:200])
    >>> alpha_precision(scorer, real[200:], alphas=[0.5, 0.95]).round(2).tolist()   # held-out real: about α
    [0.56, 0.96]
    >>> alpha_precision(scorer, rng.normal(0, 1, (100, 4)), alphas=[0.5, 0.95]).round(2).tolist()  # shifted
    [0.0, 0.09]
    """
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

    Examples
    --------
    >>> import numpy as np
    >>> from condeval.trust import clip_alignment
    >>> prompts = np.eye(2)                                       # two conditions' text embeddings
    >>> images = np.array([[2.0, 0.0], [1.0, 1.0], [0.0, -1.0]])
    >>> clip_alignment(images, prompts, np.array([0, 1, 1])).round(3).tolist()   # aligned, halfway, opposite
    [-1.0, -0.707, 1.0]
    """
    from condeval.metrics import cosine_similarity

    prompt_embeddings = np.asarray(prompt_embeddings)
    index = np.asarray(condition_index)
    if index.ndim != 1 or not np.issubdtype(index.dtype, np.integer):
        raise ValueError(f"condition_index must be a 1-D array of ints; got {index.dtype} of shape {index.shape}")
    if len(index) and (index.min() < 0 or index.max() >= len(prompt_embeddings)):
        raise ValueError(
            f"condition_index must lie in 0..{len(prompt_embeddings) - 1} (one per prompt); "
            f"got {index.min()}..{index.max()}"
        )
    return -cosine_similarity(np.asarray(image_embeddings), prompt_embeddings[index])


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

    Examples
    --------
    Any object with ``text_features(texts) -> (M, E)`` stands in for the CLIP; this one embeds a prompt
    as (smiling, serious):

    >>> import numpy as np
    >>> from types import SimpleNamespace
    >>> from condeval.trust import clip_alignment_scores
    >>> words = lambda texts: np.array([[" smiling " in t, " serious " in t] for t in texts], dtype=float)
    >>> clip = SimpleNamespace(text_features=words)
    >>> real = (np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[0, 1, 0, 0], [1, 0, 1, 1]]))   # their own conditions
    >>> generated = (np.array([[1.0, 0.2]]), np.array([[1, 0, 0, 0]]))    # smiles, though a serious man was asked
    >>> [scores.round(3).tolist() for scores in clip_alignment_scores(clip, real, generated)]
    [[-1.0, -1.0], [-0.196]]
    """
    from condeval.datasets.celeba_prompts import condition_prompts

    if not groups:
        raise ValueError("no groups to score: pass (image embeddings, attributes) pairs after clip")
    conditions, index = np.unique(np.vstack([attributes for _, attributes in groups]), axis=0, return_inverse=True)
    prompts = clip.text_features(condition_prompts(conditions))
    bounds = np.cumsum([0] + [len(attributes) for _, attributes in groups])
    return tuple(
        clip_alignment(images, prompts, index.ravel()[start:stop])
        for (images, _), start, stop in zip(groups, bounds[:-1], bounds[1:], strict=True)
    )

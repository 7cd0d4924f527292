"""Trust score under compositional shift (the trust-score paper): a per-sample score of conditional
samples fitted only on real training-support features, and the KID it is judged by.

``TrustScorer`` (:mod:`condeval.trust.score`) fits on real features and attribute values,
calibrates on held-out real rows (its own split, or a lab's), scores any generated sample and accepts
it by the P95-real rule; ``kid`` is :func:`condeval.metrics.kid`, shared with every track;
``select`` (:mod:`condeval.trust.evaluate`) runs the Section 5.1.1 selection protocol against a
``KidReference`` (per condition: :func:`~condeval.trust.filtering.selection_gain`);
:mod:`condeval.trust.scorers` holds Appendix J's alternatives, CLIP alignment against
:func:`~condeval.datasets.celeba_prompts.condition_prompts` included.
"""

from condeval.datasets.celeba_prompts import condition_prompts
from condeval.metrics import kid
from condeval.trust.evaluate import KidReference, Selection, select
from condeval.trust.filtering import acceptance, condition_thresholds, nearest_seen, selection_gain, support_distance
from condeval.trust.score import REGULARIZATION, TrustScorer
from condeval.trust.scorers import (
    AlphaPrecisionDistance,
    KnnPerAttribute,
    LinearProbeEnergy,
    alpha_precision,
    clip_alignment,
    clip_alignment_scores,
)

__all__ = [
    "REGULARIZATION",
    "AlphaPrecisionDistance",
    "KidReference",
    "KnnPerAttribute",
    "LinearProbeEnergy",
    "Selection",
    "Translator",
    "TranslatorLoss",
    "TrustAbstention",
    "TrustScorer",
    "acceptance",
    "alpha_precision",
    "clip_alignment",
    "clip_alignment_scores",
    "condition_prompts",
    "condition_thresholds",
    "kid",
    "nearest_seen",
    "select",
    "selection_gain",
    "support_distance",
]

# Scoring during generation needs torch and Lightning, which the analysis environment's rules lack:
# imported on first use.
_TRANSLATOR_NAMES = ("Translator", "TranslatorLoss", "TrustAbstention")


def __getattr__(name: str):
    if name in _TRANSLATOR_NAMES:
        from condeval.trust import translator

        return getattr(translator, name)
    raise AttributeError(f"module 'condeval.trust' has no attribute {name!r}")

"""Conformal risk control for CLIPScore: word-error sets with guarantees and calibrated intervals.

The paper is ``crc-clipscore-word-risk-control`` (attention-mask sampling, word-level error
detection with Hoeffding–Bentkus thresholds, Learn-then-Test calibration of CLIPScore intervals).
:class:`WordRiskControl` calibrates and flags word-error sets; :class:`IntervalRiskControl` calibrates
and predicts CLIPScore intervals. The bounds themselves live in :mod:`condeval.core.risk`, shared with
the other tracks.
"""

from __future__ import annotations

from condeval.crc.intervals import IntervalRiskControl
from condeval.crc.word_risk import WordRiskControl, set_risk_curve

__all__ = ["IntervalRiskControl", "WordRiskControl", "set_risk_curve"]

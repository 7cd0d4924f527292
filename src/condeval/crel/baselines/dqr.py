"""DQR alone (Kong & Mizera 2012): uncalibrated latent quantile regions.

The region R_Z(x) of a DQR trained at quantile level τ is used as is. As in
the paper, τ is lowered until the target coverage is met: among the trained
levels we take the largest whose Z-coverage on the calibration fold is at
least 1 − α.
"""

from __future__ import annotations


__all__ = ["select_quantile_level"]


def select_quantile_level(cal_coverage: dict[float, float], alpha: float) -> tuple[float, bool]:
    """Largest τ whose calibration coverage reaches 1 − α.

    Parameters
    ----------
    cal_coverage : dict
        Z-coverage on the calibration fold per trained level τ.
    alpha : float

    Returns
    -------
    level : float
        The chosen τ (the smallest trained level when none reaches the target).
    target_met : bool
    """
    if not cal_coverage:
        raise ValueError("no DQR baseline level was trained")
    meeting = [tau for tau, cov in cal_coverage.items() if cov >= 1.0 - alpha]
    if meeting:
        return max(meeting), True
    return min(cal_coverage), False

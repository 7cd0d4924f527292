"""DQR alone (Kong & Mizera 2012): uncalibrated latent quantile regions.

The region R_Z(x) of a DQR trained at quantile level τ is used as is. As in
the paper, τ is lowered until the target coverage is met: among the trained
levels we take the largest whose Z-coverage on the calibration fold is at
least 1 − α.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

__all__ = ["checkpoint_at_level", "select_quantile_level"]


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


def checkpoint_at_level(paths: Sequence[str | os.PathLike], level: float) -> str | os.PathLike:
    """The DQR checkpoint among ``paths`` trained at quantile level ``level``.

    Each checkpoint's own saved ``quantile_level`` decides, so the order in which a workflow
    lists the checkpoints does not matter.

    Parameters
    ----------
    paths : sequence of path-like
        Lightning checkpoints of :class:`~condeval.crel.models.dqr.DirectionalQuantileRegressor`.
    level : float
        The level τ chosen by :func:`select_quantile_level`.

    Returns
    -------
    path-like
        The element of ``paths`` trained at ``level``.

    Raises
    ------
    ValueError
        If none of them was, naming the levels they hold; or a checkpoint lacks its level.
    """
    import torch

    levels = {}
    for path in paths:
        hyperparameters = torch.load(path, map_location="cpu", weights_only=True).get("hyper_parameters", {})
        if "quantile_level" not in hyperparameters:
            raise ValueError(f"{path}: the checkpoint records no hyper_parameters.quantile_level")
        levels[path] = float(hyperparameters["quantile_level"])
    for path, saved in levels.items():
        if math.isclose(saved, level, rel_tol=1e-9):
            return path
    raise ValueError(f"no DQR checkpoint at quantile level {level}: {dict((str(p), t) for p, t in levels.items())}")

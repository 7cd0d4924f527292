"""Coverage and area bookkeeping shared by CReL and every baseline.

Each method yields, per test condition, the sorted set of Y-grid points that
its prediction set owns; this module turns those into the per-point table and
the one-row summary that Table 1 and the coverage figure read.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import polars as pl

from condeval.core.conformal import mean_interval
from condeval.crel.grid import OutputGrid

__all__ = ["grid_set_metrics", "cloud_set_metrics", "summarize"]


def grid_set_metrics(grid: OutputGrid, members: Iterable[tuple[int, np.ndarray, bool]], Y: np.ndarray) -> pl.DataFrame:
    """Per-point Y-coverage and area from (row, grid members, exact membership of y) triples.

    Parameters
    ----------
    grid : OutputGrid
    members : iterable of (int, ndarray, bool)
        Row index into ``Y``, the sorted flat grid indices of its set, and whether
        y_row itself lies in the set (the method's own membership rule).
    Y : ndarray (n, d)
        Responses in the grid's units.

    Returns
    -------
    polars.DataFrame
        ``row``, ``covered_y`` (y in the set), ``covered_y_grid`` (y's nearest grid
        point in the set) and ``area`` (number of grid points in the set).
    """
    rows, covered, covered_grid, area = [], [], [], []
    for row, flat, inside in members:
        rows.append(row)
        covered.append(bool(inside))
        covered_grid.append(bool(grid.covers(flat, Y[row : row + 1])[0]))
        area.append(int(flat.size))
    return pl.DataFrame(
        {"row": rows, "covered_y": covered, "covered_y_grid": covered_grid, "area": area},
        schema={"row": pl.Int64, "covered_y": pl.Boolean, "covered_y_grid": pl.Boolean, "area": pl.Int64},
    )


def summarize(method: str, alpha: float, per_point: pl.DataFrame, covered_z=None, **extra) -> dict:
    """One row of Table 1: mean coverage in Z and Y and mean area (grid points), each with its 95%
    bootstrap interval over the test points (``<key>_low``, ``<key>_high``).

    Parameters
    ----------
    method : str
        The method's name (``crel``, ``feldman``, ``dqr``, ``pcp``).
    alpha : float
        The miscoverage level the set was calibrated for.
    per_point : polars.DataFrame
        :func:`grid_set_metrics`' table of the points whose set was decoded (``covered_y``, ``area``).
    covered_z : array of bool, optional
        Per test point, whether its latent code lies in the latent region (methods calibrated in Z);
        ``coverage_z`` is None without it.
    **extra
        Kept in the summary as given (the method's threshold, the calibration size, ...).

    Examples
    --------
    >>> import numpy as np, polars as pl
    >>> per_point = pl.DataFrame({"covered_y": [True] * 90 + [False] * 10, "covered_y_grid": [True] * 100,
    ...                           "area": [400] * 100})
    >>> summary = summarize("crel", 0.1, per_point, covered_z=np.arange(1000) < 900)
    >>> summary["coverage_y"], summary["area_low"] == summary["area_high"] == 400.0   # every area alike
    (0.9, True)
    >>> bool(summary["coverage_z_high"] - summary["coverage_z_low"] < summary["coverage_y_high"] - summary["coverage_y_low"])
    True
    """
    summary = {
        "method": method,
        "alpha": float(alpha),
        "coverage_z": None,
        "coverage_y": float(per_point["covered_y"].mean()),
        "coverage_y_grid": float(per_point["covered_y_grid"].mean()),
        "area": float(per_point["area"].mean()),
        "area_std": float(per_point["area"].std()) if per_point.height > 1 else 0.0,
        "n_test_y": int(per_point.height),
    }
    means = {"coverage_y": per_point["covered_y"].to_numpy(), "area": per_point["area"].to_numpy()}
    if covered_z is not None:
        means["coverage_z"] = np.asarray(covered_z, dtype=bool)
        summary["coverage_z"] = float(means["coverage_z"].mean())
    for key, values in means.items():
        summary[f"{key}_low"], summary[f"{key}_high"] = mean_interval(values)
    summary.update(extra)
    return summary


def cloud_set_metrics(grid: OutputGrid, clouds, Y: np.ndarray, enlarge: float | None = None) -> pl.DataFrame:
    """Per-point Y-coverage and area of decoded region clouds.

    With ``enlarge=None`` a set is the union of its decoded latent cells (CReL, DQR);
    otherwise it is that union enlarged by ``enlarge`` (Feldman et al.). y is covered
    when its distance to the decoded cells is at most the enlargement.
    """
    floor = grid.half_diagonal
    if enlarge is None:
        members = (
            (c.index, grid.within(c.decoded, np.maximum(c.radii, floor)), c.distance(Y[c.index]) <= 0.0) for c in clouds
        )
    else:
        members = (
            (c.index, grid.within(c.decoded, c.radii + enlarge), c.distance(Y[c.index]) <= enlarge) for c in clouds
        )
    return grid_set_metrics(grid, members, Y)

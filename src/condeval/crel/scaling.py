"""Calibration runtime against the latent dimension r (CReL Appendix D–E, Fig. 8).

Two calibrations of the same trained VAE + latent DQR on the same calibration fold are timed:

* **CReL** (:func:`time_crel_calibration`): encode the responses, evaluate the DQR offsets,
  compute the exact latent scores E⁺ with the batched polytope distance, take the conformal
  quantile — the steps of :meth:`condeval.crel.CReL.calibrate`, each timed.
* **Feldman et al.'s grid scheme** (:func:`time_grid_calibration`): per calibration point the
  m^r latent grid of its region is decoded and scored exactly as our baseline does
  (:func:`condeval.crel.regions.iter_region_clouds` + :func:`condeval.crel.baselines.feldman.feldman_scores`),
  plus the output-space grid step of Appendix D (:func:`output_grid_step`), then the conformal
  quantile (:func:`condeval.crel.baselines.feldman.feldman_threshold`).

The grid scheme is exponential in r, so it runs under a time budget: a probe of a few calibration
points is timed and extrapolated linearly to the whole fold; when the extrapolation exceeds the
budget the rest is not run and the extrapolated time is reported (``feasible=False``).
:func:`infeasibility_point` names the first r where that happens.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass

import numpy as np
import torch

from condeval.crel.baselines.feldman import feldman_scores, feldman_threshold
from condeval.crel.polytope import polytope_distance
from condeval.crel.regions import (
    RegionCloud,
    iter_region_clouds,
    latent_bounding_box,
    max_violation,
)

__all__ = [
    "FELDMAN_REGION_SAMPLE",
    "CalibrationRegions",
    "GridSettings",
    "GridTiming",
    "feldman_output_grid",
    "infeasibility_point",
    "output_grid_step",
    "time_crel_calibration",
    "time_grid_calibration",
    "time_grid_scheme",
    "time_latent_grid_chunks",
]

#: Decoded region points entering the output-grid distances, at most (a seeded subsample),
#: as in Feldman et al.'s public code (``get_distance_from_quantile_region_aux``).
FELDMAN_REGION_SAMPLE = 20_000

Decoder = Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor]


# --------------------------------------------------------------------------- CReL


def time_crel_calibration(crel, X_cal: np.ndarray, Y_cal: np.ndarray, alpha: float) -> dict:
    """Wall-clock seconds of CReL's calibration on (X_cal, Y_cal), step by step.

    Runs the steps of :meth:`CReL.calibrate <condeval.crel.CReL.calibrate>` (encode, DQR
    offsets, exact distances E⁺ = dist(E(y), R_Z(x)), conformal quantile) in order and leaves
    ``crel`` calibrated at ``alpha``.

    Parameters
    ----------
    crel : CReL
        Trained estimator.
    X_cal, Y_cal : ndarray (n, p), (n, d)
        Calibration fold.
    alpha : float
        Miscoverage level.

    Returns
    -------
    dict
        ``encode_s``, ``offsets_s``, ``distances_s``, ``quantile_s``, ``total_s`` (seconds),
        ``gamma`` (γ_cal), ``n_cal``, ``latent_dim``, ``n_directions``.
    """
    marks = [time.perf_counter()]
    Z = crel.encode(X_cal, Y_cal)
    marks.append(time.perf_counter())
    b = crel.offsets(X_cal)
    marks.append(time.perf_counter())
    U = crel.directions
    scores = polytope_distance(U, b, Z)
    marks.append(time.perf_counter())
    crel.calibrate_from_scores(scores, alpha)
    marks.append(time.perf_counter())
    steps = np.diff(marks)
    return {
        "encode_s": float(steps[0]),
        "offsets_s": float(steps[1]),
        "distances_s": float(steps[2]),
        "quantile_s": float(steps[3]),
        "total_s": float(marks[-1] - marks[0]),
        "gamma": float(crel.gamma_cal_),
        "n_cal": int(Z.shape[0]),
        "latent_dim": int(Z.shape[1]),
        "n_directions": int(U.shape[0]),
    }


# --------------------------------------------------------------------------- output-space grid


def feldman_output_grid(
    Y_ref: np.ndarray, max_points: int = 300_000, quantiles=(0.01, 0.99), pad: float = 0.2, seed: int = 0
) -> np.ndarray:
    """Feldman's output-space grid: at most ``max_points`` points over the padded quantile box.

    The box is :class:`~condeval.crel.grid.OutputGrid`'s (``[q_0.01 − pad, q_0.99 + pad]`` per axis of
    ``Y_ref``) with ``m = max(2, ⌊max_points^(1/d)⌋)`` points per axis. When ``m^d`` exceeds
    ``max_points`` — always for d = 20, where even 2 points per axis make 2^20 = 1,048,576 — a
    seeded subset of ``max_points`` of its points is kept: Appendix E fixes the number of
    output-space points at 300,000, and the cost of the scheme depends on that number only.

    Returns
    -------
    ndarray (M, d), float32
    """
    Y_ref = np.asarray(Y_ref, dtype=np.float64)
    lo, hi = np.quantile(Y_ref, quantiles, axis=0)
    lo, hi = lo - pad, hi + pad
    d = Y_ref.shape[1]
    m = max(2, math.floor(max_points ** (1.0 / d) + 1e-9))
    total = m**d
    if total >= 2**62:
        raise ValueError(f"output grid of {m}^{d} points is too large to index")
    if total <= max_points:
        flat = np.arange(total)
    else:
        flat = np.sort(np.random.default_rng(seed).choice(total, size=max_points, replace=False))
    multi = np.stack(np.unravel_index(flat, (m,) * d), axis=-1)
    return (lo + multi * ((hi - lo) / (m - 1))).astype(np.float32)


def output_grid_step(
    grid: np.ndarray | torch.Tensor,
    decoded: np.ndarray,
    radii: np.ndarray,
    y: np.ndarray,
    rng: np.random.Generator,
    max_region_sample: int = FELDMAN_REGION_SAMPLE,
    block: int = 2**22,
    grid_sq: torch.Tensor | None = None,
) -> tuple[float, int]:
    """The output-space step of Feldman's calibration for one calibration point.

    What is computed (our reading of Appendix D's "original space discretization" and of
    Feldman et al.'s ``get_distance_from_quantile_region_aux``): the distance of every
    output-grid point to the decoded region R_Y(x) — the union of the cell balls of
    :class:`~condeval.crel.regions.RegionCloud`, the definition in docs/crel/method.md, which replaces
    Feldman's γ_init (90th percentile of nearest-neighbour distances in the cloud) — gives the
    grid points the region owns (its area) and those outside it; then the distance of y to the
    nearest grid point outside the region (Feldman's "inside" score, used by his conformalize
    when the uncalibrated region over-covers). Brute force, as in Feldman's code, over at most
    ``max_region_sample`` decoded points. It is long for its docstring, our reading of his step.

    Parameters
    ----------
    grid : ndarray or Tensor (M, d)
        Output grid (see :func:`feldman_output_grid`).
    decoded, radii : ndarray (k, d), (k,)
        The region's decoded points and cell radii.
    y : ndarray (d,)
        The calibration response.
    rng : numpy Generator
        For the subsample of decoded points.
    max_region_sample : int
        Decoded points kept, at most.
    block : int
        Grid-point × region-point distances computed at once (memory bound).
    grid_sq : Tensor (M,), optional
        Squared norms of the grid points, when the caller keeps them across points.

    Returns
    -------
    distance_to_complement : float
        Distance of ``y`` to the nearest grid point outside the region (inf if none).
    owned : int
        Number of grid points in the region.
    """
    if decoded.shape[0] > max_region_sample:
        keep = rng.choice(decoded.shape[0], size=max_region_sample, replace=False)
        decoded, radii = decoded[keep], radii[keep]
    g = torch.as_tensor(grid, dtype=torch.float32)
    g_sq = (g * g).sum(dim=1) if grid_sq is None else grid_sq
    centres = torch.as_tensor(decoded, dtype=torch.float32)
    # ‖g − c‖ > ρ for every centre  ⇔  min_j (‖c_j‖² − ρ_j² − 2 g·c_j) + ‖g‖² > 0
    offset = (centres * centres).sum(dim=1) - torch.as_tensor(radii, dtype=torch.float32) ** 2
    outside = torch.empty(g.shape[0], dtype=torch.bool)
    rows = max(1, block // max(1, centres.shape[0]))
    with torch.no_grad():
        for start in range(0, g.shape[0], rows):
            gap = torch.addmm(offset, g[start : start + rows], centres.T, alpha=-2.0).min(dim=1).values
            outside[start : start + rows] = gap + g_sq[start : start + rows] > 0
        target = torch.as_tensor(np.asarray(y), dtype=torch.float32)
        to_y = torch.addmv(g_sq + (target * target).sum(), g, target, alpha=-2.0)[outside]
        distance = float(to_y.min().clamp_min(0).sqrt()) if to_y.numel() else math.inf
    return distance, int(g.shape[0] - int(outside.sum()))


# --------------------------------------------------------------------------- grid scheme


@dataclass
class GridTiming:
    """Outcome of timing Feldman's grid calibration at one latent dimension.

    Attributes
    ----------
    total_s : float
        Measured total when ``feasible``, else the linear extrapolation to all points.
    feasible : bool
        Whether the scheme was run on every calibration point.
    reason : str
        Why not: ``"budget"`` (the extrapolation exceeds ``budget_s``) or ``"memory"`` (one
        region's m^r latent grid exceeds ``max_region_points``, so only chunks of it were timed);
        empty when feasible.
    measured_s : float
        Wall time actually spent (setup + probe, or everything).
    budget_s : float
    n_cal, latent_dim, points_per_axis, latent_points_per_region, output_grid_points : int
    probe_points : int
        Calibration points timed in the probe (0 when chunks of one region were timed instead).
    setup_s : float
        DQR offsets and building the output grid.
    latent_s, output_grid_s : float
        Seconds in the latent part (decode, membership, scores) and in :func:`output_grid_step`,
        measured over the points that were run (probe only when not feasible).
    per_point_s : float
        Seconds per calibration point used for the extrapolation.
    gamma : float or None
        The calibrated radius (conformal quantile of the scores), when feasible.
    mean_owned_output_points : float or None
        Mean number of output-grid points owned by the decoded regions that were run.
    chunk_timing : dict or None
        :func:`time_latent_grid_chunks`'s record when ``reason == "memory"``.
    """

    total_s: float
    feasible: bool
    reason: str
    measured_s: float
    budget_s: float
    n_cal: int
    latent_dim: int
    points_per_axis: int
    latent_points_per_region: int
    output_grid_points: int
    probe_points: int
    setup_s: float
    latent_s: float
    output_grid_s: float
    per_point_s: float
    gamma: float | None = None
    mean_owned_output_points: float | None = None
    chunk_timing: dict | None = None

    def to_dict(self) -> dict:
        return asdict(self)


class _OutputStep:
    """Runs :func:`output_grid_step` on every cloud passing through, timing it."""

    def __init__(self, grid, Y: np.ndarray, seed: int):
        self.grid = None if grid is None else torch.as_tensor(grid, dtype=torch.float32)
        self.grid_sq = None if grid is None else (self.grid * self.grid).sum(dim=1)
        self.Y = Y
        self.rng = np.random.default_rng(seed)
        self.seconds = 0.0
        self.owned: list[int] = []

    def __call__(self, clouds: Iterable[RegionCloud], offset: int) -> Iterator[RegionCloud]:
        for cloud in clouds:
            if self.grid is not None:
                start = time.perf_counter()
                _, owned = output_grid_step(
                    self.grid, cloud.decoded, cloud.radii, self.Y[offset + cloud.index], self.rng, grid_sq=self.grid_sq
                )
                self.seconds += time.perf_counter() - start
                self.owned.append(owned)
            yield cloud


def _score_rows(regions: CalibrationRegions, rows: range, m: int, chunk: int, step: _OutputStep) -> np.ndarray:
    """Our Feldman baseline's scores for ``rows`` (decoded m^r grid per region), plus the output step."""
    U, X, sl = regions.U, regions.X, slice(rows.start, rows.stop)
    clouds = iter_region_clouds(
        U, regions.b[sl], 0.0, regions.decode, None if X is None else X[sl], m ** U.shape[1], chunk=chunk
    )
    return feldman_scores(step(clouds, rows.start), regions.Y[sl])


@dataclass(frozen=True, eq=False)
class CalibrationRegions:
    """The calibration fold as the grid scheme reads it: each point's latent region, the decoder, the fold.

    Parameters
    ----------
    U : ndarray (K, r)
        Directions of the half-spaces (containing ±e_j).
    b : ndarray (n, K)
        DQR offsets of the calibration points: R_Z(x_i) = {z : U z >= b_i}.
    decode : callable
        ``decode(z, x) -> y`` in torch.
    Y : ndarray (n, d)
        Calibration responses, in the decoder's output space.
    X : ndarray (n, p) or None, default None
        Calibration conditions handed to ``decode`` (None for an unconditional decoder).
    """

    U: np.ndarray
    b: np.ndarray
    decode: Decoder
    Y: np.ndarray
    X: np.ndarray | None = None


@dataclass(frozen=True)
class GridSettings:
    """How Feldman et al.'s grid calibration is run and timed (Appendix E), shared by every latent dimension.

    Parameters
    ----------
    points_per_axis : int, default 5
        m of the latent grid (Appendix E: 5).
    max_output_points : int, default 300_000
        Output-space grid points (Appendix E: 300,000); 0 skips the output step.
    budget_s : float, default 300.0
        Seconds the whole calibration may take before it is declared infeasible.
    probe_points : int, default 20
        Calibration points timed before deciding.
    max_region_points : int, default 2**16
        Latent grid points held in memory at once (≈ ``max_region_points × K × 8`` bytes).
    probe_budget_s : float, default 30.0
        Seconds spent timing chunks when a region does not fit in memory.
    seed : int, default 0
        Seed of the output-grid subset and of the region subsamples.
    """

    points_per_axis: int = 5
    max_output_points: int = 300_000
    budget_s: float = 300.0
    probe_points: int = 20
    max_region_points: int = 2**16
    probe_budget_s: float = 30.0
    seed: int = 0


def time_latent_grid_chunks(
    regions: CalibrationRegions,
    lower: np.ndarray,
    upper: np.ndarray,
    points_per_axis: int = 5,
    *,
    chunk: int = 2**18,
    budget_s: float = 20.0,
    collect: list | None = None,
    collect_rows: int = FELDMAN_REGION_SAMPLE,
) -> dict:
    """Time the latent part of the grid scheme chunk by chunk and extrapolate to all points.

    For calibration point i, the m^r latent grid over the box ``[lower_i, upper_i]`` (C order, as
    :func:`~condeval.crel.grid.box_grid` lays it out) is walked in chunks of ``chunk`` points: the
    points inside R_Z(x_i) (``max_violation <= 0``) are decoded and the distance of y_i to the
    nearest decoded member is taken. Chunks are visited in a seeded random order (a partial walk
    then sees a fair sample of the box: its corners hold fewer members, so less decoding) and
    timed until ``budget_s`` is spent; the time is extrapolated to all chunks of all points. Used where one
    region's grid does not fit in memory, and by Benchmark A (``benchmarks/bench_calibration.py``).
    It is long for its docstring; the walk itself is :class:`_ChunkWalk`.

    Parameters
    ----------
    regions : CalibrationRegions
        Directions, offsets, decoder, targets Y (in the decoder's output space) and conditions X.
    lower, upper : ndarray (r,) or (n, r)
        Latent box per point (one box for all points when 1-D).
    points_per_axis : int
        m.
    chunk : int
        Latent grid points per chunk (memory: ``chunk × K`` floats).
    budget_s : float
        Seconds of timing before extrapolating.
    collect : list or None
        If given, decoded members (ndarray chunks) are appended until ``collect_rows`` rows.

    Returns
    -------
    dict
        ``latent_grid_points``, ``points_per_axis``, ``chunk``, ``chunks_per_point``,
        ``timed_chunks``, ``timed_calibration_points``, ``member_fraction``, ``seconds_timed``,
        ``seconds_extrapolated`` (all points), ``extrapolated``.
    """
    n = regions.b.shape[0]
    walk = _ChunkWalk(regions, (lower, upper), points_per_axis, chunk, (collect, collect_rows))
    done_points = 0
    start = time.perf_counter()
    with torch.no_grad():
        for i in range(n):
            if not walk.point(i, start, budget_s):
                break
            done_points += 1
    elapsed = time.perf_counter() - start
    return {
        "latent_grid_points": int(walk.total),
        "points_per_axis": points_per_axis,
        "chunk": int(chunk),
        "chunks_per_point": int(walk.n_chunks),
        "timed_chunks": walk.done_chunks,
        "timed_calibration_points": done_points,
        "member_fraction": walk.members_seen / max(walk.grid_seen, 1),
        "seconds_timed": elapsed,
        "seconds_extrapolated": elapsed / max(walk.done_chunks, 1) * walk.n_chunks * n,
        "extrapolated": done_points < n,
    }


class _ChunkWalk:
    """The walk of :func:`time_latent_grid_chunks` over one point's latent grid at a time, with its counts."""

    def __init__(self, regions: CalibrationRegions, box, m: int, chunk: int, collect: tuple[list | None, int]):
        self.regions, self.m, self.chunk = regions, m, chunk
        n, self.r = regions.b.shape[0], regions.U.shape[1]
        self.lower, self.upper = (np.broadcast_to(bound, (n, self.r)) for bound in box)
        self.total = m**self.r
        self.n_chunks = -(-self.total // chunk)
        self.collect, self.collect_rows = collect
        self.done_chunks = self.members_seen = self.grid_seen = self.kept = 0

    def point(self, i: int, start: float, budget_s: float) -> bool:
        """Walk point ``i``'s chunks in its seeded order; False when the budget ran out before its last."""
        target = torch.as_tensor(self.regions.Y[i : i + 1], dtype=torch.float32)
        for first in np.random.default_rng(i).permutation(self.n_chunks) * self.chunk:
            self._chunk(i, first, target)
            self.done_chunks += 1
            if time.perf_counter() - start > budget_s:
                return False
        return True

    def _chunk(self, i: int, first: int, target: torch.Tensor) -> None:
        U, b, X, m, r = self.regions.U, self.regions.b, self.regions.X, self.m, self.r
        flat = np.arange(first, min(first + self.chunk, self.total))
        lower, upper = self.lower[i], self.upper[i]
        grid = lower + np.stack(np.unravel_index(flat, (m,) * r), axis=-1) / (m - 1) * (upper - lower)
        members = grid[max_violation(U, b[i], grid) <= 0.0]
        self.members_seen, self.grid_seen = self.members_seen + members.shape[0], self.grid_seen + flat.size
        if not members.shape[0]:
            return
        x = None if X is None else torch.as_tensor(X[i : i + 1], dtype=torch.float32).expand(members.shape[0], -1)
        decoded = self.regions.decode(torch.as_tensor(members, dtype=torch.float32), x).float()
        torch.cdist(target, decoded).min()
        if self.collect is not None and self.kept < self.collect_rows:
            self.collect.append(decoded[: self.collect_rows - self.kept].numpy())
            self.kept += min(decoded.shape[0], self.collect_rows - self.kept)


def time_grid_scheme(
    regions: CalibrationRegions,
    alpha: float,
    output_grid: np.ndarray | None,
    settings: GridSettings = GridSettings(),
    *,
    setup_s: float = 0.0,
) -> GridTiming:
    """Time Feldman's grid calibration given the regions (see :func:`time_grid_calibration`).

    Parameters
    ----------
    regions : CalibrationRegions
        Directions (containing ±e_j), DQR offsets, decoder, and the calibration responses and
        conditions (or None).
    alpha : float
    output_grid : ndarray (M, d) or None
        Output-space grid (None skips the output step; ``settings.max_output_points`` is not read).
    settings : GridSettings
        Points per axis, budgets, probe size, memory bound and seed.
    setup_s : float
        Seconds already spent on setup (offsets, output grid), added to the totals.
    """
    n, cells = regions.b.shape[0], settings.points_per_axis ** regions.U.shape[1]
    common = _common_fields(regions, output_grid, settings, setup_s)
    if cells > settings.max_region_points:
        return _time_by_chunks(regions, output_grid, common, settings)
    chunk = max(1, min(32, settings.max_region_points // cells))
    step = _OutputStep(output_grid, regions.Y, settings.seed)
    probe = min(max(1, settings.probe_points), n)
    start = time.perf_counter()
    scores = [_score_rows(regions, range(probe), settings.points_per_axis, chunk, step)]
    probe_s = time.perf_counter() - start
    estimate = setup_s + probe_s * n / probe
    timing = {"probe_points": probe, "mean_owned_output_points": None, **common}
    if estimate > settings.budget_s:
        return _probe_timing(estimate, probe_s, step, timing)
    if probe < n:
        scores.append(_score_rows(regions, range(probe, n), settings.points_per_axis, chunk, step))
    gamma = feldman_threshold(np.concatenate(scores), alpha)
    run_s = time.perf_counter() - start
    timing["mean_owned_output_points"] = _mean(step.owned)
    return GridTiming(
        total_s=setup_s + run_s,
        feasible=True,
        reason="",
        measured_s=setup_s + run_s,
        latent_s=run_s - step.seconds,
        output_grid_s=step.seconds,
        per_point_s=run_s / n,
        gamma=gamma,
        **timing,
    )


def _common_fields(regions: CalibrationRegions, output_grid, settings: GridSettings, setup_s: float) -> dict:
    """The :class:`GridTiming` fields every outcome at this latent dimension shares."""
    n, r = regions.b.shape[0], regions.U.shape[1]
    return {
        "budget_s": float(settings.budget_s),
        "n_cal": int(n),
        "latent_dim": int(r),
        "points_per_axis": int(settings.points_per_axis),
        "latent_points_per_region": int(settings.points_per_axis**r),
        "setup_s": float(setup_s),
        "output_grid_points": 0 if output_grid is None else int(output_grid.shape[0]),
    }


def _probe_timing(estimate: float, probe_s: float, step: _OutputStep, timing: dict) -> GridTiming:
    """The extrapolated timing of a probe whose estimate exceeds the budget (the rest is not run)."""
    timing["mean_owned_output_points"] = _mean(step.owned)
    return GridTiming(
        total_s=estimate,
        feasible=False,
        reason="budget",
        measured_s=timing["setup_s"] + probe_s,
        latent_s=probe_s - step.seconds,
        output_grid_s=step.seconds,
        per_point_s=probe_s / timing["probe_points"],
        **timing,
    )


def _time_by_chunks(regions: CalibrationRegions, output_grid, common: dict, settings: GridSettings) -> GridTiming:
    """A region's grid does not fit in memory: time chunks of it, and the output step of one region."""
    lower, upper = latent_bounding_box(regions.U, regions.b)
    decoded: list[np.ndarray] = []
    record = time_latent_grid_chunks(
        regions,
        lower,
        upper,
        common["points_per_axis"],
        chunk=settings.max_region_points,
        budget_s=settings.probe_budget_s,
        collect=decoded,
    )
    latent_per_point = record["seconds_extrapolated"] / common["n_cal"]
    output_s, output_per_point, owned = 0.0, 0.0, None
    if output_grid is not None and decoded:
        output_s, output_per_point, owned = _time_one_output_step(
            output_grid, decoded, record, common, regions.Y, settings.seed
        )
    per_point = latent_per_point + output_per_point
    total = common["setup_s"] + per_point * common["n_cal"]
    return GridTiming(
        total_s=total,
        feasible=False,
        reason="budget" if total > common["budget_s"] else "memory",
        measured_s=common["setup_s"] + record["seconds_timed"] + output_s,
        probe_points=0,
        latent_s=record["seconds_timed"],
        output_grid_s=output_s,
        per_point_s=per_point,
        mean_owned_output_points=owned,
        chunk_timing=record,
        **common,
    )


def _time_one_output_step(output_grid, decoded, record: dict, common: dict, Y, seed: int):
    """One region's output step, a few times on a cloud of the expected member count: (seconds, median, owned)."""
    rng = np.random.default_rng(seed)
    pool = np.vstack(decoded)
    size = round(min(FELDMAN_REGION_SAMPLE, max(1.0, record["member_fraction"] * common["latent_points_per_region"])))
    cloud = pool[rng.choice(pool.shape[0], size=size, replace=size > pool.shape[0])]
    seconds = []
    owned = None
    for i in range(3):  # one region's step, a few times: the median is its per-point cost
        start = time.perf_counter()
        _, owned = output_grid_step(output_grid, cloud, np.zeros(size), Y[i % len(Y)], rng)
        seconds.append(time.perf_counter() - start)
    return sum(seconds), float(np.median(seconds)), owned


def _mean(values: list[int]) -> float | None:
    return float(np.mean(values)) if values else None


def time_grid_calibration(
    crel,
    X_cal: np.ndarray,
    Y_cal: np.ndarray,
    alpha: float,
    settings: GridSettings = GridSettings(),
    *,
    Y_ref: np.ndarray | None = None,
) -> GridTiming:
    """Time Feldman et al.'s grid calibration on (X_cal, Y_cal) under a time budget.

    What is run per calibration point i (Appendix D–E, as our baseline implements it):

    1. the latent grid of ``settings.points_per_axis`` points per axis (m^r) over the bounding box of
       R_Z(x_i) is decoded, the points inside R_Z(x_i) are kept with their decoded cell radii,
       and the score is the distance of y_i to that decoded region
       (:func:`~condeval.crel.regions.iter_region_clouds`, :func:`~condeval.crel.baselines.feldman.feldman_scores`);
    2. the output-space step on a grid of at most ``settings.max_output_points`` points
       (:func:`feldman_output_grid`, :func:`output_grid_step`): the grid points owned by the
       decoded region and the distance of y_i to the nearest one outside it.

    Setup (DQR offsets of all points, building the output grid) is timed once; the radius is the
    conformal quantile of the scores (:func:`~condeval.crel.baselines.feldman.feldman_threshold`), so
    when run in full ``gamma`` equals our Feldman baseline's.

    Budget semantics: the first ``probe_points`` points are run and timed; ``setup + probe ×
    n / probe_points`` is the linear extrapolation. If it exceeds ``budget_s`` the remaining
    points are not run and that extrapolation is returned with ``feasible=False,
    reason="budget"`` (``measured_s`` is the time actually spent). Otherwise every point is run
    and the measured total is returned with ``feasible=True`` (it may end slightly above the
    budget when the probe under-estimated). When one region's m^r grid exceeds
    ``max_region_points`` (memory), the latent part is timed by chunks of that many grid points
    for ``probe_budget_s`` seconds (:func:`time_latent_grid_chunks`) and extrapolated to every
    chunk of every point, the output step is timed (median of 3) on a cloud of the expected member
    count (min(20,000, member fraction × m^r)) drawn from the decoded members (not at all when the
    timed chunks held no member: at such r the latent part dwarfs it); such a result is never feasible
    (``reason`` is ``"budget"`` if the extrapolation exceeds the budget, else ``"memory"``). The docstring is
    long because Fig. 8 reports these budget semantics; the body is a few lines.

    Parameters
    ----------
    crel : CReL
        Trained estimator (its VAE decoder and latent DQR are the baseline's).
    X_cal, Y_cal : ndarray (n, p), (n, d)
        Calibration fold.
    alpha : float
    settings : GridSettings
        Points per axis, output-grid size, budgets, probe size, memory bound and seed.
    Y_ref : ndarray (m, d), optional
        Outputs whose padded 1%–99% box spans the output grid (default ``Y_cal``; the workflow
        passes the LGM fold, as for :class:`~condeval.crel.grid.OutputGrid`).

    Returns
    -------
    GridTiming
    """
    start = time.perf_counter()
    regions = CalibrationRegions(crel.directions, crel.offsets(X_cal), crel.decode_torch, Y_cal, X_cal)
    grid = (
        feldman_output_grid(Y_cal if Y_ref is None else Y_ref, settings.max_output_points, seed=settings.seed)
        if settings.max_output_points
        else None
    )
    setup_s = time.perf_counter() - start
    return time_grid_scheme(regions, alpha, grid, settings, setup_s=setup_s)


# --------------------------------------------------------------------------- summary


def infeasibility_point(results: Iterable[GridTiming | dict]) -> int | None:
    """The first latent dimension r at which the grid scheme stopped being feasible.

    Parameters
    ----------
    results : iterable of GridTiming or dict
        One per r, each with ``latent_dim`` and ``feasible`` (order does not matter).

    Returns
    -------
    int or None
        The smallest r whose grid calibration was not run in full (its extrapolated time
        exceeded the budget, or a region's grid exceeded memory); None if every r ran.
    """
    rows = [r.to_dict() if isinstance(r, GridTiming) else r for r in results]
    infeasible = [int(row["latent_dim"]) for row in rows if not row["feasible"]]
    return min(infeasible) if infeasible else None

"""CReL reliability score: the worst similarity over the calibrated latent region.

For condition ``x_i`` with calibrated latent region ``S^γ(x_i)`` (the polytope
``R(x_i) = {z : U z >= b[i]}`` enlarged by γ), Eq. (8) of the paper is

    ρ_i = min_{z ∈ S^γ(x_i)}  similarity(decode(z, x_i), gt_i),

the similarity of the worst generation the model can produce for ``x_i``
inside its conformal region (higher similarity is better). Following Sec. 3.3,
it is approximated by multi-start projected gradient descent: draw
``num_z0`` random points of ``S^γ(x_i)``, start from the worst of them, and
run PGD with exact projections onto ``S^γ`` (see
:func:`condeval.crel.polytope.project_onto_region`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from condeval.core.devices import device_of
from condeval.core.logs import progress as progress_bar
from condeval.core.nn import random_unit_vectors
from condeval.core.settings import SearchSettings
from condeval.crel import polytope as _poly

__all__ = ["CalibratedRegions", "reliability_score", "SearchSettings"]

Decode = Callable[[torch.Tensor, "torch.Tensor | None"], torch.Tensor]
Similarity = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True, eq=False)
class CalibratedRegions:
    """The calibrated latent regions ``S^γ(x_i)`` searched by :func:`reliability_score`: the polytopes
    ``R(x_i) = {z : U z >= b[i]}`` enlarged by γ, and the point that anchors their random starts.

    Parameters
    ----------
    U : array_like, shape (K, r)
        Directions of the half-spaces.
    b : array_like, shape (n, K)
        Offsets: ``R(x_i) = {z : U z >= b[i]}``.
    gamma : float or array_like, shape (n,)
        Enlargement radius (γ_cal), non-negative.
    center : array_like, shape (r,) or (n, r), optional
        Point whose projection onto ``R(x_i)`` anchors the random starts
        (default: the origin, the mean of the latent prior).
    """

    U: object
    b: object
    gamma: object
    center: object = None


def reliability_score(
    decode: Decode,
    similarity: Similarity,
    regions: CalibratedRegions,
    gt,
    x=None,
    *,
    search: SearchSettings | None = None,
    extra_starts=None,
    return_info: bool = False,
):
    """CReL reliability ρ_i = min over ``S^γ(x_i)`` of the similarity to ``gt_i`` (Eq. 8).

    The function is long for its docstring and example; the search itself is in the private helpers below.

    Parameters
    ----------
    decode : callable
        ``decode(z, x) -> y_hat``: differentiable torch decoder, ``z`` (m, r)
        float64, ``x`` (m, p) or None; returns (m, d). Cast inside ``decode``
        if the network is float32. Must act row-wise (e.g. eval mode).
    similarity : callable
        ``similarity(y_hat, gt) -> (m,)`` in torch; higher is better.
    regions : CalibratedRegions
        The regions ``S^γ(x_i)``: directions U (K, r), offsets b (n, K), radius γ and the anchor of the starts.
    gt : array_like, shape (n, d)
        Ground truths the generations are compared with.
    x : array_like, shape (n, p), optional
        Conditions handed to ``decode`` (None for an unconditional decoder).
    search : SearchSettings, optional
        The search: starts, steps, step size, seed, batch size and stopping rule
        (:class:`~condeval.core.settings.SearchSettings`; None: its defaults).
    extra_starts : array_like, shape (n, r) or (n, m, r), optional
        Points evaluated beside the random starts, e.g. the latent code of the model's own
        output. Those inside ``S^γ(x_i)`` count as starts, so the score is at most the
        similarity there; those outside are replaced by a point of ``R(x_i)``.
    return_info : bool, default False
        Also return the per-row convergence record (below).

    Returns
    -------
    scores : ndarray, shape (n,)
        Smallest similarity found per row: no larger than the similarity at
        any of the evaluated feasible starts.
    z_worst : ndarray, shape (n, r)
        The latent point of ``S^γ(x_i)`` where it is attained.
    info : dict of ndarray, only with ``return_info``
        ``last_improvement`` (n,): how much the best similarity fell over the last ``patience``
        steps run; ``converged`` (n,): ``last_improvement <= min_improvement`` after at least
        ``patience`` steps; ``steps_run`` (n,): PGD steps taken in the row's batch.

    Raises
    ------
    EmptyRegionError
        If some ``R(x_i)`` is empty.

    Examples
    --------
    The worst point of the half-plane ``z_1 >= 1`` enlarged by 0.5 against a target at the origin,
    with the similarity the negative squared distance: the region's nearest point is ``(0.5, 0)``,
    its farthest lies along the unbounded ray, so the worst score is ``-(far)^2``.

    >>> import numpy as np, torch
    >>> U, b = np.array([[1.0, 0.0]]), np.array([[1.0]])
    >>> closeness = lambda y, gt: -((y - gt) ** 2).sum(dim=1)
    >>> scores, z = reliability_score(lambda z, x: z, closeness, CalibratedRegions(U, b, 0.5), np.zeros((1, 2)),
    ...                               search=SearchSettings(num_z0=4, steps=5, progress=False))
    >>> bool(scores[0] < -0.25 and z[0, 0] >= 0.5 - 1e-9)
    True
    """
    search = SearchSettings() if search is None else search
    if not isinstance(search, SearchSettings):
        raise TypeError(f"search must be a SearchSettings; got {type(search).__name__}")
    device = device_of(gt, regions.U, regions.b)
    U_t, b_t = _poly._prepare_ub(regions.U, regions.b, device)
    n, r = b_t.shape[0], U_t.shape[1]
    rows = (
        _poly._gamma_vector(regions.gamma, n, device),
        torch.as_tensor(gt, device=device),
        None if x is None else torch.as_tensor(x, device=device),
        _centers(regions.center, n, r, device),
        _extra_starts(extra_starts, n, r, device),
    )
    if rows[1].shape[0] != n or (rows[2] is not None and rows[2].shape[0] != n):
        raise ValueError(f"gt and x must have {n} rows (one per row of b)")
    scores, z_worst, improvement, steps_run = _search_batches(decode, similarity, U_t, b_t, rows, search)
    if not return_info:
        return scores, z_worst
    converged = (improvement <= search.min_improvement) & (steps_run >= search.patience)
    return scores, z_worst, {"last_improvement": improvement, "converged": converged, "steps_run": steps_run}


def _extra_starts(extra_starts, n: int, r: int, device) -> torch.Tensor | None:
    """The extra starts as (n, m, r) float64, refused by shape or by a non-finite row."""
    if extra_starts is None:
        return None
    e_t = torch.as_tensor(extra_starts, dtype=torch.float64, device=device)
    if e_t.ndim == 2:
        e_t = e_t[:, None, :]
    if e_t.shape[0] != n or e_t.shape[2] != r:
        raise ValueError(
            f"extra_starts must have shape ({n}, r) or ({n}, m, r) with r = {r}; got "
            f"{tuple(torch.as_tensor(extra_starts).shape)}"
        )
    if not bool(torch.isfinite(e_t).all()):
        bad = int(torch.nonzero(~torch.isfinite(e_t).reshape(n, -1).all(dim=1))[0, 0])
        raise ValueError(f"extra_starts hold NaN or infinite values (row {bad})")
    return e_t


def _search_batches(decode, similarity, U_t, b_t, rows, search: SearchSettings):
    """The search over ``search.batch_size`` rows at a time; ``rows`` are the per-row tensors (γ, gt, x,
    centre, extra starts) in that order, None where absent."""
    n, r = b_t.shape[0], U_t.shape[1]
    gen = torch.Generator(device=b_t.device).manual_seed(int(search.seed))
    stop = dict(patience=search.patience, min_improvement=search.min_improvement, early_stop=search.early_stop)
    cfg = dict(num_z0=search.num_z0, steps=search.steps, lr=search.lr, init_scale=search.init_scale, tol=search.tol)
    cfg |= dict(gen=gen, stop=stop, top=min(search.refine_top, search.num_z0))
    scores, z_worst = np.empty(n), np.empty((n, r))
    improvement, steps_run = np.empty(n), np.empty(n, dtype=np.int64)
    starts = range(0, n, search.batch_size)
    for s in progress_bar(starts, desc="CReL reliability", unit="batch", enabled=search.progress is not False):
        sl = slice(s, min(n, s + search.batch_size))
        batch = (U_t, b_t[sl], *(None if row is None else row[sl] for row in rows))
        try:
            val, z, gain, steps_run[sl] = _batch_worst(decode, similarity, *batch, **cfg)
        except _poly.EmptyRegionError as err:  # name the row of the full input
            raise _poly.shift_row_index(err, s) from None
        scores[sl] = val.detach().cpu().numpy()
        z_worst[sl] = z.detach().cpu().numpy()
        improvement[sl] = gain.detach().cpu().numpy()
    return scores, z_worst, improvement, steps_run


def _centers(center, n: int, r: int, device) -> torch.Tensor:
    if center is None:
        return torch.zeros(n, r, dtype=torch.float64, device=device)
    c = torch.as_tensor(center, dtype=torch.float64, device=device)
    return c.expand(n, r) if c.ndim == 1 else c


# --------------------------------------------------------------------------- one batch


def _batch_worst(
    decode, similarity, U, b, g, gt, x, center, extra, *, num_z0, steps, lr, init_scale, tol, gen, top, stop
):
    """Multi-start PGD for one batch of rows; returns (best value, best z, last improvement, steps run)."""
    anchor = _poly._solve(U, b, center.contiguous(), tol=tol).X
    Z0 = _random_starts(U, b, g, anchor, num_z0, init_scale, gen)  # (B, J, r)
    if extra is not None:
        Z0 = torch.cat([Z0, _feasible_or_anchor(U, b, g, anchor, extra, tol)], dim=1)
    B, J, r = Z0.shape
    with torch.no_grad():
        vals = _evaluate(decode, similarity, Z0.reshape(B * J, r), _repeat(x, J), _repeat(gt, J))
    vals = torch.nan_to_num(vals.reshape(B, J).double(), nan=torch.inf)
    start_val, j = vals.topk(top, dim=1, largest=False)  # (B, top), worst first
    z = Z0.gather(1, j[..., None].expand(B, top, r)).reshape(B * top, r)
    if top > 1:
        b, g, gt, x = b.repeat_interleave(top, 0), g.repeat_interleave(top), _repeat(gt, top), _repeat(x, top)
    val, z, gain, steps_run = _pgd(
        decode, similarity, U, b, g, gt, x, z, start_val.reshape(-1), steps=steps, lr=lr, tol=tol, **stop
    )
    best, k = val.reshape(B, top).min(dim=1)
    rows = torch.arange(B, device=z.device)
    return best, z.reshape(B, top, r)[rows, k], gain.reshape(B, top)[rows, k], steps_run


def _feasible_or_anchor(U, b, g, anchor, extra, tol):
    """``extra`` (B, m, r) where it lies in ``S^γ``; elsewhere the row's anchor (a point of ``R``)."""
    B, m, r = extra.shape
    flat = extra.reshape(B * m, r).contiguous()
    rows = b.repeat_interleave(m, 0)
    projection = _poly._solve(U, rows, flat, tol=tol).X
    inside = ((flat - projection).norm(dim=1) <= g.repeat_interleave(m) + tol).reshape(B, m)
    return torch.where(inside[..., None], extra, anchor[:, None, :])


def _repeat(t: torch.Tensor | None, J: int) -> torch.Tensor | None:
    return None if t is None else t.repeat_interleave(J, dim=0)


def _evaluate(decode, similarity, z, x, gt) -> torch.Tensor:
    out = similarity(decode(z, x), gt)
    return out.reshape(-1)


def _random_starts(U, b, g, anchor, J: int, init_scale: float, gen) -> torch.Tensor:
    """``J`` random points of ``S^γ`` per row along random rays from a point of ``R``.

    For a unit direction ``v`` let ``t_max`` be how far ``anchor + t v`` stays in
    ``R`` (capped at ``init_scale``-scaled length on unbounded rays). Then
    ``anchor + τ (t_max + γ) v`` lies in ``S^γ`` for ``τ ∈ [0, 1]``: up to
    ``t_max`` it is in ``R`` and beyond it is within γ of ``anchor + t_max v``.
    ``τ = U^{1/r}`` with ``U ~ U(0, 1)`` is the radial law of a uniform point
    of a star-shaped body seen from its centre, so starts spread over the
    volume (most of it lies near the boundary, where the worst case sits).
    """
    B, r = anchor.shape
    dev = anchor.device
    V = random_unit_vectors((B, J, r), gen, device=dev)
    tau = torch.rand(B, J, generator=gen, device=dev, dtype=torch.float64) ** (1.0 / r)
    with _poly.solver_threads(dev):
        tmax = _ray_lengths(U, b, anchor, V).clamp(max=(10.0 * init_scale + g)[:, None])
    return anchor[:, None, :] + (tau * (tmax + g[:, None]))[..., None] * V


def _ray_lengths(U, b, anchor, V, chunk: int = 128) -> torch.Tensor:
    """``t_max[i, j] = max{t >= 0 : U (anchor_i + t V_ij) >= b_i}`` (inf if unbounded).

    With slacks ``s = U anchor − b >= 0``, ``1 / t_max = max_k (−u_k·v) / s_k``
    (over the ``k`` with ``u_k·v < 0``), one batched product per chunk of rows.
    """
    B, J, _ = V.shape
    inv_t = torch.empty(B, J, dtype=V.dtype, device=V.device)
    for s in range(0, B, chunk):
        e = min(B, s + chunk)
        slack = torch.addmm(b[s:e], anchor[s:e], U.T, beta=-1.0).clamp_min_(1e-300)
        W = U.T.neg()[None] / slack[:, None, :]  # (c, r, K): −u_k / s_k
        inv_t[s:e] = torch.bmm(V[s:e], W).amax(dim=2).clamp_min_(0.0)
    return 1.0 / inv_t


def _pgd(decode, similarity, U, b, g, gt, x, z, best_val, *, steps, lr, tol, patience, min_improvement, early_stop):
    """Projected gradient descent on the similarity, keeping the best iterate.

    Returns the best value and point, how much the best value fell over the last ``patience``
    steps, and the number of steps taken (fewer than ``steps`` when ``early_stop`` ends it).
    """
    best_z = z.clone()
    history = [best_val]  # history[t]: the best value once the iterate after step t is evaluated
    warm = None
    for t in range(steps):
        zr = z.detach().requires_grad_(True)
        val = _evaluate(decode, similarity, zr, x, gt)
        (grad,) = torch.autograd.grad(val.sum(), zr)
        best_val, best_z = _keep_best(best_val, best_z, val.detach().double(), z)
        if t > 0:  # the iterate after step t - 1 was just evaluated
            history.append(best_val)
        if early_stop and len(history) > patience and (history[-1 - patience] - best_val).max() <= min_improvement:
            break
        step = torch.nan_to_num(grad.double(), nan=0.0, posinf=0.0, neginf=0.0)
        z, _, sol = _poly._project_region_prepared(U, b, g, z - lr * step, tol=tol, warm=warm)
        warm = (sol.A, sol.m)
    else:
        if steps > 0:
            with torch.no_grad():
                val = _evaluate(decode, similarity, z, x, gt)
            best_val, best_z = _keep_best(best_val, best_z, val.double(), z)
            history.append(best_val)
    window = history[-1 - min(patience, len(history) - 1)]
    return best_val, best_z, window - best_val, len(history) - 1


def _keep_best(best_val, best_z, val, z):
    better = val < best_val
    return torch.where(better, val, best_val), torch.where(better[:, None], z, best_z)

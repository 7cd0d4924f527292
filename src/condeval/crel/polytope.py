"""Exact Euclidean projection onto the CReL latent polytopes.

A directional quantile regressor gives, for condition ``x_i``, the half-spaces
``{a : u_k^T a >= b[i, k]}``, ``k = 1..K``; the region ``R(x_i)`` is their
intersection. This module computes, for many rows at once, the exact distance
``dist(Z[i], R(x_i))`` and the projection of ``Z[i]`` onto ``R(x_i)``, and the
projection onto the γ-enlarged region ``S^γ = {z : dist(z, R) <= γ}``.

Algorithm
---------
The projection is the strictly convex QP ``min ½‖a − z‖²  s.t.  U a >= b_i``.
It is solved by the dual active-set method of Goldfarb & Idnani (1983), batched
over rows: start at the unconstrained minimiser ``a = z``; add the most violated
constraint; take the dual step that makes it active while keeping the
multipliers of the active set non-negative, dropping the constraint whose
multiplier reaches zero first (partial step). The active set never holds more
than ``r`` linearly independent normals; its QR factors ``N = Q R`` are kept
per row (Householder update on addition, refactorisation on removal), so
every linear algebra call is a batched ``r × r`` one. The only ``O(K)`` work is
the violation check ``U a − b_i``, one (chunked) matrix product over the rows
that still run; finished rows leave the working set.

Infeasibility is detected exactly as in Goldfarb–Idnani: a violated
constraint whose normal lies in the span of the active normals with no
multiplier able to decrease certifies that ``{a : U a >= b_i}`` is empty.
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass

import numpy as np
import torch

from condeval.core.devices import device_of
from condeval.core.io import is_torch

__all__ = [
    "EmptyRegionError",
    "polytope_distance",
    "project_onto_polytope",
    "project_onto_region",
]

#: Threads torch may use inside the CPU solver. The loop is many small ops, and
#: with OpenMP teams of 2+ on a shared machine every op waits on a descheduled
#: thread (measured 10-40x slower under load vs ~1.1x faster when idle); None
#: leaves torch's setting alone.
SOLVER_CPU_THREADS: int | None = 1

_DEP_EPS = 1e-12  # ‖component of n_p outside span(active)‖ below this: dependent
_RATIO_EPS = 1e-12  # relative threshold for a positive dual-step component


class EmptyRegionError(ValueError):
    """The region ``{a : U a >= b[i]}`` of some row ``i`` has no point.

    Parameters
    ----------
    message : str
        Full message; it names the row (use :func:`empty_region_message`).
    index : int
        The (first) offending row, i.e. the index of the condition ``x_i``.
    count : int, default 1
        How many rows have an empty region.

    Attributes
    ----------
    index, count : int

    Examples
    --------
    >>> import numpy as np
    >>> from condeval.crel import EmptyRegionError, polytope_distance
    >>> U = np.array([[1.0, 0.0], [-1.0, 0.0]])              # a >= b[i, 0] and -a >= b[i, 1]
    >>> b = np.array([[0.0, -1.0], [1.0, 0.0]])              # row 0: 0 <= a <= 1; row 1: 1 <= a <= 0
    >>> try:
    ...     polytope_distance(U, b, np.zeros((2, 2)))
    ... except EmptyRegionError as error:
    ...     print(error.index, error.count)
    ...     print(error)
    1 1
    region for row 1 (x index 1) is empty: no point satisfies all half-space constraints u_k^T a >= b[i, k]
    """

    def __init__(self, message: str, index: int, count: int = 1):
        self.index = int(index)
        self.count = int(count)
        super().__init__(message)


def _empty(index: int, detail: str, count: int = 1) -> EmptyRegionError:
    msg = f"region for row {index} (x index {index}) is empty: {detail}"
    if count > 1:
        msg += f" ({count} rows have an empty region; this is the first)"
    err = EmptyRegionError(msg, index=index, count=count)
    err.detail = detail
    return err


def shift_row_index(err: EmptyRegionError, offset: int) -> EmptyRegionError:
    """The same error for a batch that starts at row ``offset`` of the full input."""
    detail = getattr(err, "detail", str(err))
    return _empty(err.index + offset, detail, err.count)


# --------------------------------------------------------------------------- inputs


def _as_tensor(a, device=None) -> torch.Tensor:
    """float64 tensor view of ``a`` (no copy for float64 numpy / tensors on ``device``)."""
    if isinstance(a, torch.Tensor):
        t = a.detach()
        return t.to(device=device if device is not None else t.device, dtype=torch.float64)
    arr = np.asarray(a, dtype=np.float64)
    if arr.ndim == 2 and arr.shape[0] > 1 and arr.strides[0] == 0:  # np.broadcast_to row
        return torch.as_tensor(arr[0].copy(), device=device).expand(arr.shape)
    with warnings.catch_warnings():  # read-only arrays: we never write to inputs
        warnings.simplefilter("ignore", UserWarning)
        return torch.as_tensor(arr, device=device)


def _to_output(t: torch.Tensor, like_torch: bool):
    return t if like_torch else t.cpu().numpy()


def _prepare(U, b, Z):
    """Validate shapes and values; return float64 tensors (U unit rows, b, Z)."""
    device = device_of(Z, U, b)
    Z_t = _as_tensor(Z, device)
    if Z_t.ndim != 2:
        raise ValueError(f"Z must have shape (n, r); got {tuple(Z_t.shape)}")
    if not torch.isfinite(Z_t).all():
        raise ValueError("Z must be finite")
    U_t, b_t = _prepare_ub(U, b, device, n=Z_t.shape[0])
    if Z_t.shape[1] != U_t.shape[1]:
        raise ValueError(f"Z must have shape (n, {U_t.shape[1]}); got {tuple(Z_t.shape)}")
    return U_t, b_t, Z_t.contiguous()


def _prepare_ub(U, b, device, n: int | None = None):
    """Validated float64 ``U`` (unit rows) and ``b`` of shape (n, K)."""
    U_t, b_t = _as_tensor(U, device), _as_tensor(b, device)
    if U_t.ndim != 2:
        raise ValueError(f"U must have shape (K, r); got {tuple(U_t.shape)}")
    K = U_t.shape[0]
    if b_t.ndim == 1 and n is not None:
        b_t = b_t.expand(n, K)
    n = b_t.shape[0] if n is None else n
    if b_t.shape != (n, K):
        raise ValueError(f"b must have shape ({n}, {K}); got {tuple(b_t.shape)}")
    if not torch.isfinite(U_t).all():
        raise ValueError("U must be finite")
    U_t, b_t = _normalise_directions(U_t, b_t)
    if b_t.numel() and not bool(b_t.max() < torch.inf):  # one pass finds NaN and +inf
        nan = torch.isnan(b_t).any(dim=1)
        if nan.any():
            raise ValueError(f"b contains NaN (first in row {int(nan.nonzero()[0, 0])})")
        rows = torch.isposinf(b_t).any(dim=1).nonzero().flatten()
        raise _empty(int(rows[0]), "a threshold is +inf", count=rows.numel())
    b_t = b_t if b_t.stride(0) == 0 else b_t.contiguous()
    return U_t, b_t


def _normalise_directions(U: torch.Tensor, b: torch.Tensor):
    """Scale rows of U to unit norm (and b with them); drop zero rows."""
    norms = U.norm(dim=1)
    if bool(((norms - 1.0).abs() <= 1e-12).all()):
        return U.contiguous(), b
    zero = norms <= 1e-300
    if zero.any():
        bad = (b[:, zero] > 0).any(dim=1)
        if bad.any():
            rows = bad.nonzero().flatten()
            raise _empty(int(rows[0]), "a zero direction has a positive threshold", rows.numel())
        keep = ~zero
        U, b, norms = U[keep], b[:, keep], norms[keep]
    return (U / norms[:, None]).contiguous(), b / norms


@contextlib.contextmanager
def solver_threads(device):
    """Temporarily cap torch's CPU threads at :data:`SOLVER_CPU_THREADS`."""
    old = torch.get_num_threads()
    n = SOLVER_CPU_THREADS
    if torch.device(device).type != "cpu" or n is None or old <= n:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


# --------------------------------------------------------------------------- state


@dataclass
class _State:
    """Per-row Goldfarb–Idnani state of the rows still running (compacted)."""

    rows: torch.Tensor  # (L,) original row indices
    X: torch.Tensor  # (L, r) current primal point
    A: torch.Tensor  # (L, r) active constraint indices, slots 0..m-1
    m: torch.Tensor  # (L,) size of the active set
    lam: torch.Tensor  # (L, r) multipliers of the active slots (0 on padding)
    Q: torch.Tensor  # (L, r, r) orthogonal factor
    R: torch.Tensor  # (L, r, r) upper triangular, identity on the padding
    pend: torch.Tensor  # (L,) bool: a violated constraint p is being added
    p: torch.Tensor  # (L,) index of the pending constraint
    lam_p: torch.Tensor  # (L,) its multiplier
    s_p: torch.Tensor  # (L,) its slack u_p^T x − b_p (< 0 while pending)
    iters: torch.Tensor  # (L,) iterations spent

    def select(self, keep: torch.Tensor) -> _State:
        return _State(**{k: v[keep] for k, v in self.__dict__.items()})


def _eye(L: int, r: int, like: torch.Tensor) -> torch.Tensor:
    return torch.eye(r, dtype=like.dtype, device=like.device).expand(L, r, r).clone()


def _qr_active(U: torch.Tensor, A: torch.Tensor, m: torch.Tensor):
    """QR factors of the active normals (columns), identity on the padding."""
    r = U.shape[1]
    act = torch.arange(r, device=U.device) < m[:, None]
    N = (U[A] * act[..., None]).mT  # (L, r, r): column j is u_{A[j]} or 0
    Q, R = torch.linalg.qr(N)
    pad = torch.diag_embed((~act).to(R.dtype))
    return Q, R + pad


def _initial_state(U, b, Z, warm) -> _State:
    n, r = Z.shape
    dev, dt = Z.device, Z.dtype
    zeros_i = torch.zeros(n, dtype=torch.long, device=dev)
    st = _State(
        rows=torch.arange(n, device=dev),
        X=Z.clone(),
        A=torch.zeros(n, r, dtype=torch.long, device=dev),
        m=zeros_i.clone(),
        lam=torch.zeros(n, r, dtype=dt, device=dev),
        Q=_eye(n, r, Z),
        R=_eye(n, r, Z),
        pend=torch.zeros(n, dtype=torch.bool, device=dev),
        p=zeros_i.clone(),
        lam_p=torch.zeros(n, dtype=dt, device=dev),
        s_p=torch.zeros(n, dtype=dt, device=dev),
        iters=zeros_i.clone(),
    )
    if warm is not None:
        _apply_warm_start(st, U, b, Z, *warm)
    return st


def _apply_warm_start(st: _State, U, b, Z, A0: torch.Tensor, m0: torch.Tensor) -> None:
    """Start rows at the projection onto their guessed active set when it is dual feasible.

    A guess is accepted when its normals are independent and all multipliers of
    the equality-constrained projection are non-negative; that is a valid
    Goldfarb–Idnani starting pair. Other rows start cold.
    """
    idx = (m0 > 0).nonzero().flatten()
    if idx.numel() == 0:
        return
    A, m = A0[idx].to(Z.device), m0[idx].to(Z.device)
    r = Z.shape[1]
    act = torch.arange(r, device=Z.device) < m[:, None]
    Q, R = _qr_active(U, A, m)
    N_t_z = (U[A] @ Z[idx].unsqueeze(-1)).squeeze(-1)
    rhs = torch.where(act, b[idx[:, None], A] - N_t_z, 0.0)
    w = torch.linalg.solve_triangular(R.mT, rhs.unsqueeze(-1), upper=False)
    lam = torch.linalg.solve_triangular(R, w, upper=True).squeeze(-1)
    X = Z[idx] + (Q @ torch.where(act, w.squeeze(-1), 0.0).unsqueeze(-1)).squeeze(-1)
    diag = torch.where(act, R.diagonal(dim1=-2, dim2=-1).abs(), 1.0)
    scale = 1.0 + lam.abs().amax(dim=1)
    ok = (diag.amin(dim=1) > 1e-8) & ((lam >= -1e-12 * scale[:, None]) | ~act).all(dim=1)
    ok &= torch.isfinite(X).all(dim=1)
    sel = idx[ok]
    st.X[sel], st.A[sel], st.m[sel] = X[ok], A[ok], m[ok]
    st.lam[sel] = torch.where(act[ok], lam[ok].clamp_min(0.0), 0.0)
    st.Q[sel], st.R[sel] = Q[ok], R[ok]


# --------------------------------------------------------------------------- steps


def _most_violated(U_t, b, rows, X, buf):
    """Smallest slack ``min_k u_k^T x − b[row, k]`` and its index, chunked over rows."""
    L = rows.shape[0]
    vals = torch.empty(L, dtype=X.dtype, device=X.device)
    ids = torch.empty(L, dtype=torch.long, device=X.device)
    cs = buf.shape[0]
    on_cpu = X.device.type == "cpu"
    for s in range(0, L, cs):
        e = min(L, s + cs)
        B = buf[: e - s]
        torch.index_select(b, 0, rows[s:e], out=B)
        B.addmm_(X[s:e], U_t, beta=-1.0)  # B = X U^T − b
        if on_cpu:  # numpy's argmin is ~6x faster than torch.min(dim) on CPU
            ids[s:e] = torch.from_numpy(B.numpy().argmin(axis=1))
            vals[s:e] = B.gather(1, ids[s:e, None]).squeeze(1)
        else:
            torch.min(B, dim=1, out=(vals[s:e], ids[s:e]))
    return vals, ids


def _check(st: _State, U_t, b, buf, tol):
    """Pick the most violated constraint of every non-pending row.

    Returns the state restricted to rows that still run, plus the rows that
    converged and their final points.
    """
    ci = (~st.pend).nonzero().flatten()
    if ci.numel() == 0:
        return st, None
    vals, ids = _most_violated(U_t, b, st.rows[ci], st.X[ci], buf)
    thr = tol * (1.0 + st.X[ci].norm(dim=1))
    viol = vals < -thr
    vi = ci[viol]
    st.pend[vi] = True
    st.p[vi] = ids[viol]
    st.s_p[vi] = vals[viol]
    st.lam_p[vi] = 0.0
    done_mask = torch.zeros_like(st.pend)
    done_mask[ci[~viol]] = True
    done = st.select(done_mask)
    return st.select(~done_mask), done


def _dual_step(st: _State, U: torch.Tensor):
    """One Goldfarb–Idnani step for every (pending) row; returns infeasible mask."""
    L, r = st.X.shape
    slot = torch.arange(r, device=st.X.device)
    act = slot < st.m[:, None]
    n_p = U[st.p]
    d = (st.Q.mT @ n_p.unsqueeze(-1)).squeeze(-1)
    d_a = torch.where(act, d, 0.0)
    d_c = torch.where(act, 0.0, d)
    zdir = (st.Q @ d_c.unsqueeze(-1)).squeeze(-1)
    zn = (d_c * d_c).sum(dim=1)
    rr = torch.linalg.solve_triangular(st.R, d_a.unsqueeze(-1), upper=True).squeeze(-1)
    rr_eps = _RATIO_EPS * (1.0 + rr.abs().amax(dim=1, keepdim=True))
    pos = act & (rr > rr_eps)
    ratio = torch.where(pos, st.lam / torch.where(pos, rr, 1.0), torch.inf)
    t1, j = ratio.min(dim=1)
    dep = zn <= _DEP_EPS**2
    t2 = torch.where(dep, torch.inf, -st.s_p / torch.where(dep, 1.0, zn))
    t = torch.minimum(t1, t2)
    infeasible = torch.isinf(t)
    t = torch.where(infeasible, 0.0, t)
    full = (t2 <= t1) & ~infeasible
    step = torch.where(dep, 0.0, t)
    st.X += step[:, None] * zdir
    st.lam = torch.where(act, (st.lam - t[:, None] * rr).clamp_min(0.0), 0.0)
    st.lam_p += t
    st.s_p += step * zn
    st.iters += 1
    _add_constraint(st, full, d, d_a, d_c)
    _drop_constraint(st, U, ~full & ~infeasible, j)
    return infeasible


def _add_constraint(st: _State, full, d, d_a, d_c) -> None:
    """Append the pending constraint to the active set (Householder QR update).

    With ``d = Q^T n_p`` a reflection ``H`` acting on slots ``m..r-1`` maps
    ``d[m:]`` to ``-sign(d_m) ‖d[m:]‖ e_m``; ``Q ← Q H`` and ``R`` gains the
    column ``(d[:m], -sign(d_m) ‖d[m:]‖)``. Earlier columns are untouched.
    """
    F = full.nonzero().flatten()
    if F.numel() == 0:
        return
    every = F.numel() == full.numel()
    r = st.X.shape[1]
    m = st.m[F]
    dc = d_c if every else d_c[F]
    alpha = d[F].gather(1, m[:, None]).squeeze(1)
    sigma = dc.norm(dim=1)
    sgn_sigma = torch.where(alpha >= 0, sigma, -sigma)
    v = dc.clone()
    v[torch.arange(F.numel(), device=F.device), m] += sgn_sigma
    coef = -2.0 / (v * v).sum(dim=1)
    Q = st.Q if every else st.Q[F]
    Qv = (Q @ v.unsqueeze(-1)).squeeze(-1)
    Q.add_((Qv * coef[:, None]).unsqueeze(-1) * v.unsqueeze(1))  # Q ← Q (I − 2 v vᵀ / vᵀv)
    if not every:
        st.Q[F] = Q
    col = d_a[F]
    col[torch.arange(F.numel(), device=F.device), m] = -sgn_sigma
    st.R[F[:, None], torch.arange(r, device=F.device)[None, :], m[:, None]] = col
    st.A[F, m] = st.p[F]
    st.lam[F, m] = st.lam_p[F]
    st.m[F] = m + 1
    st.pend[F] = False


def _drop_constraint(st: _State, U: torch.Tensor, drop, j) -> None:
    """Remove slot ``j`` from the active set of the given rows and refactorise."""
    D = drop.nonzero().flatten()
    if D.numel() == 0:
        return
    r = st.X.shape[1]
    slot = torch.arange(r, device=st.X.device)
    src = (slot + (slot >= j[D, None]).long()).clamp_max(r - 1)
    A = st.A[D].gather(1, src)
    lam = st.lam[D].gather(1, src)
    m = st.m[D] - 1
    act = slot < m[:, None]
    st.A[D] = torch.where(act, A, 0)
    st.lam[D] = torch.where(act, lam, 0.0)
    st.m[D] = m
    st.Q[D], st.R[D] = _qr_active(U, st.A[D], m)


# --------------------------------------------------------------------------- driver


@dataclass
class _Solution:
    X: torch.Tensor  # (n, r) projections
    A: torch.Tensor  # (n, r) final active sets
    m: torch.Tensor  # (n,) sizes
    lam: torch.Tensor  # (n, r) multipliers


def _solve(U, b, Z, tol: float = 1e-9, warm=None, max_iter: int | None = None) -> _Solution:
    """Batched Goldfarb–Idnani projection of every row of Z onto its polytope."""
    with solver_threads(Z.device), torch.no_grad():
        return _solve_impl(U, b, Z, tol, warm, max_iter)


def _solve_impl(U, b, Z, tol, warm, max_iter) -> _Solution:
    n, r = Z.shape
    K = U.shape[0]
    max_iter = max_iter if max_iter is not None else 100 + 20 * r
    out = _Solution(
        X=Z.clone(),
        A=torch.zeros(n, r, dtype=torch.long, device=Z.device),
        m=torch.zeros(n, dtype=torch.long, device=Z.device),
        lam=torch.zeros(n, r, dtype=Z.dtype, device=Z.device),
    )
    if n == 0 or K == 0:
        return out
    U_t = U.T.contiguous()
    chunk = 512 if Z.device.type == "cpu" else 16384
    buf = torch.empty(min(n, chunk), K, dtype=Z.dtype, device=Z.device)
    st = _initial_state(U, b, Z, warm)
    infeasible_rows = []
    while True:  # every pass spends one iteration of each live row: bounded by max_iter
        st, done = _check(st, U_t, b, buf, tol)
        if done is not None and done.rows.numel():
            _store(out, done)
        if st.rows.numel() == 0:
            break
        infeasible = _dual_step(st, U)
        if infeasible.any():
            infeasible_rows.append(st.rows[infeasible])
            st = st.select(~infeasible)
        stuck = st.iters > max_iter
        if stuck.any():
            bad = int(st.rows[stuck].min())
            raise RuntimeError(
                f"projection for row {bad} did not converge in {max_iter} active-set "
                "iterations (numerically degenerate constraints?)"
            )
    if infeasible_rows:
        rows = torch.cat(infeasible_rows)
        raise _empty(
            int(rows.min()),
            "no point satisfies all half-space constraints u_k^T a >= b[i, k]",
            count=rows.numel(),
        )
    if not torch.isfinite(out.X).all():  # pragma: no cover - defensive
        bad = int((~torch.isfinite(out.X)).any(dim=1).nonzero()[0, 0])
        raise FloatingPointError(f"projection for row {bad} is not finite")
    return out


def _store(out: _Solution, done: _State) -> None:
    out.X[done.rows] = done.X
    out.A[done.rows] = done.A
    out.m[done.rows] = done.m
    out.lam[done.rows] = done.lam


# --------------------------------------------------------------------------- public API


def polytope_distance(U, b, Z, *, return_projection: bool = False, tol: float = 1e-9):
    """Exact Euclidean distance from each ``Z[i]`` to ``{a : U a >= b[i]}``.

    Parameters
    ----------
    U : ndarray or Tensor, shape (K, r)
        Directions, one per row. Rows are rescaled to unit norm internally
        (with ``b`` rescaled alike), so the region is unchanged.
    b : ndarray or Tensor, shape (n, K) or (K,)
        Thresholds: row ``i`` defines ``R_i = {a : u_k^T a >= b[i, k] ∀k}``.
        ``-inf`` switches a constraint off.
    Z : ndarray or Tensor, shape (n, r)
        Query points.
    return_projection : bool, default False
        Also return the projections ``argmin_{a ∈ R_i} ‖a − Z[i]‖``.
    tol : float, default 1e-9
        Feasibility tolerance: a point counts as inside when no constraint is
        violated by more than ``tol · (1 + ‖a‖)``. Points inside get distance
        exactly 0 and projection exactly ``Z[i]``.

    Returns
    -------
    dist : ndarray or Tensor, shape (n,)
        Distances (float64). Torch in → torch out on the same device.
    proj : ndarray or Tensor, shape (n, r)
        Only when ``return_projection``.

    Raises
    ------
    EmptyRegionError
        If some ``R_i`` is empty; ``.index`` is the smallest such row.
    ValueError
        On bad shapes or non-finite ``U``/``Z``, NaN in ``b``.

    Notes
    -----
    Batched Goldfarb–Idnani dual active-set method (see the module docstring).
    The result is not differentiable (inputs are detached).

    Examples
    --------
    >>> import numpy as np
    >>> from condeval.crel import polytope_distance
    >>> U, b = np.eye(2), np.zeros(2)                        # the quadrant a_1 >= 0, a_2 >= 0, for every row
    >>> Z = np.array([[-3.0, -4.0], [1.0, 2.0], [-1.0, 5.0]])
    >>> dist, proj = polytope_distance(U, b, Z, return_projection=True)
    >>> dist.round(3).tolist()                               # a point inside is at distance exactly 0
    [5.0, 0.0, 1.0]
    >>> proj.round(3).tolist()
    [[0.0, 0.0], [1.0, 2.0], [0.0, 5.0]]
    """
    sol, Z_t = _project_core(U, b, Z, tol)
    dist = (sol.X - Z_t).norm(dim=1)
    like_torch = is_torch(U, b, Z)
    if return_projection:
        return _to_output(dist, like_torch), _to_output(sol.X, like_torch)
    return _to_output(dist, like_torch)


def _project_core(U, b, Z, tol, warm=None):
    U_t, b_t, Z_t = _prepare(U, b, Z)
    with torch.no_grad():
        return _solve(U_t, b_t, Z_t, tol=tol, warm=warm), Z_t


def project_onto_polytope(U, b, Z, *, tol: float = 1e-9):
    """Projection of each ``Z[i]`` onto ``{a : U a >= b[i]}``, shape (n, r).

    See :func:`polytope_distance` for the arguments.
    """
    return polytope_distance(U, b, Z, return_projection=True, tol=tol)[1]


def project_onto_region(U, b, gamma, Y, *, tol: float = 1e-9):
    """Nearest point of ``S^γ_i = {z : dist(z, R_i) <= γ_i}`` to each ``Y[i]``.

    ``S^γ`` is the Minkowski sum of the polytope ``R_i`` and a ball of radius
    γ, so the nearest point is ``Y[i]`` itself when ``dist(Y[i], R_i) <= γ_i``
    and otherwise ``a* + γ (Y − a*) / ‖Y − a*‖`` with ``a*`` the projection of
    ``Y[i]`` onto ``R_i``: the point at distance γ from the polytope on the
    segment from ``a*`` towards ``Y``.

    The paper prints ``y* + γ (y* − y)/‖y* − y‖``; that is a sign typo: it
    moves from the projection *away* from ``y`` and leaves a point farther
    from ``y`` than necessary. The formula above is the correct one.

    Parameters
    ----------
    U : ndarray or Tensor, shape (K, r)
    b : ndarray or Tensor, shape (n, K)
    gamma : float or array_like, shape (n,)
        Non-negative radii.
    Y : ndarray or Tensor, shape (n, r)
    tol : float
        As in :func:`polytope_distance`.

    Returns
    -------
    ndarray or Tensor, shape (n, r)

    Examples
    --------
    >>> import numpy as np
    >>> from condeval.crel import project_onto_region
    >>> U, b = np.eye(2), np.zeros((2, 2))                   # R: the quadrant a_1 >= 0, a_2 >= 0
    >>> Y = np.array([[-3.0, -4.0], [-0.5, 0.0]])            # 5 and 0.5 away from R
    >>> project_onto_region(U, b, 1.0, Y).round(3).tolist()  # the first moves to distance 1; the second stays
    [[-0.6, -0.8], [-0.5, 0.0]]
    """
    out, _, _ = _project_region(U, b, gamma, Y, tol=tol)
    return _to_output(out, is_torch(U, b, Y, gamma))


def _project_region(U, b, gamma, Y, *, tol=1e-9, warm=None):
    """Projection onto S^γ plus the distance to R and the final active sets."""
    U_t, b_t, Y_t = _prepare(U, b, Y)
    g = _gamma_vector(gamma, Y_t.shape[0], Y_t.device)
    return _project_region_prepared(U_t, b_t, g, Y_t, tol=tol, warm=warm)


def _gamma_vector(gamma, n: int, device) -> torch.Tensor:
    g = _as_tensor(gamma, device).reshape(-1)
    if g.numel() not in (1, n):
        raise ValueError(f"gamma must be a scalar or have shape ({n},); got {g.numel()} values")
    if not torch.isfinite(g).all() or (g < 0).any():
        raise ValueError("gamma must be finite and non-negative")
    return g.expand(n)


def _project_region_prepared(U_t, b_t, g, Y_t, *, tol=1e-9, warm=None):
    """:func:`project_onto_region` on validated float64 tensors (no copies of b)."""
    with torch.no_grad():
        sol = _solve(U_t, b_t, Y_t, tol=tol, warm=warm)
        diff = Y_t - sol.X
        dist = diff.norm(dim=1)
        outside = dist > g
        scale = torch.where(outside, g / torch.where(outside, dist, 1.0), 1.0)
        out = torch.where(outside[:, None], sol.X + scale[:, None] * diff, Y_t)
    return out, dist, sol

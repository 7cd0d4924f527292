"""Property tests of the exact polytope projection and the CReL reliability score.

References are independent: cvxpy (Clarabel, tight tolerances) for the QPs,
a KKT certificate (feasibility + non-negative multipliers by NNLS) for the
projections, and dense grids for the r = 2 cases.
"""

from __future__ import annotations

import cvxpy as cp  # noqa: E402  (the lock installs both references: no silent skip)
import numpy as np
import pytest
import quadprog  # noqa: E402
import torch
from scipy.optimize import nnls

from condeval.core.settings import SearchSettings
from condeval.crel import polytope as P
from condeval.crel.polytope import (
    EmptyRegionError,
    polytope_distance,
    project_onto_polytope,
    project_onto_region,
)
from condeval.crel.reliability import CalibratedRegions, reliability_score

CLARABEL = dict(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10, max_iter=400)
CLARABEL_SOCP = dict(CLARABEL, tol_gap_abs=1e-9, tol_gap_rel=1e-9, tol_feas=1e-9)


# --------------------------------------------------------------------------- helpers


def unit_rows(A: np.ndarray) -> np.ndarray:
    return A / np.linalg.norm(A, axis=1, keepdims=True)


def random_polytopes(rng, n: int, r: int, K: int, degenerate: str | None = None):
    """Bounded-ish random polytopes around centres c_i with slack h >= 0.1 at c_i.

    degenerate: "duplicate" (repeated rows of U and of b), "parallel" (rows
    perturbed by 1e-7), "opposite" (−u_k for half the rows: slabs), "vertex"
    (half the constraints pass through c_i).
    """
    U = unit_rows(rng.standard_normal((K, r)))
    h = rng.uniform(0.1, 1.0, size=(n, K))
    if degenerate == "duplicate":
        U, h = np.vstack([U, U[: K // 2]]), np.hstack([h, h[:, : K // 2]])
    elif degenerate == "parallel":
        near = unit_rows(U[: K // 2] + 1e-7 * rng.standard_normal((K // 2, r)))
        U, h = np.vstack([U, near]), np.hstack([h, h[:, : K // 2] + 1e-9])
    elif degenerate == "opposite":
        U, h = np.vstack([U, -U[: K // 2]]), np.hstack([h, rng.uniform(0.1, 1.0, (n, K // 2))])
    elif degenerate == "vertex":
        h[:, : K // 2] = 0.0
    c = rng.standard_normal((n, r))
    b = c @ U.T - h
    return U, b, c


def qp_projection(U, b_row, z):
    a = cp.Variable(U.shape[1])
    cp.Problem(cp.Minimize(cp.sum_squares(a - z)), [U @ a >= b_row]).solve(**CLARABEL)
    return a.value


def kkt_residual(U, b_row, z, a, tol=1e-8):
    """Distance of a − z from the cone of the active normals (0 ⇔ optimal)."""
    active = U @ a - b_row <= tol * (1.0 + np.abs(a).max())
    if not active.any():
        return float(np.linalg.norm(a - z))
    _, res = nnls(U[active].T, a - z)
    return float(res)


# --------------------------------------------------------------------------- distance


def reference_distance(U, b, Z):
    """0 where z satisfies every constraint (a certificate in itself), else the QP's distance.

    An interior-point solver cannot be the reference for feasible points at a degenerate
    vertex: with no Slater point it stops ~1e-6 away from z even at 1e-10 tolerances.
    """
    inside = np.all(Z @ U.T >= b, axis=1)
    qp = [0.0 if inside[i] else np.linalg.norm(qp_projection(U, b[i], Z[i]) - Z[i]) for i in range(len(Z))]
    return np.array(qp), inside


DEGENERACIES = [None, "duplicate", "parallel", "opposite", "vertex"]


@pytest.mark.parametrize("r", [2, 3, 12])
@pytest.mark.parametrize("degenerate", DEGENERACIES)
def test_distance_matches_qp(r, degenerate):
    rng = np.random.default_rng(100 * r + DEGENERACIES.index(degenerate))
    n, K = 12, 10 * r
    U, b, c = random_polytopes(rng, n, r, K, degenerate)
    Z = c + rng.standard_normal((n, r)) * rng.choice([0.05, 1.0, 4.0], size=(n, 1))
    Z[:3] = c[:3]  # certainly inside (every slack >= 0 at c)
    dist, proj = polytope_distance(U, b, Z, return_projection=True)
    ref, inside = reference_distance(U, b, Z)
    assert np.all(np.isfinite(dist)) and inside[:3].all() and not inside.all()
    np.testing.assert_allclose(dist, ref, atol=1e-6, rtol=0)
    assert np.all(dist[:3] == 0.0) and np.array_equal(proj[:3], Z[:3])
    assert np.all(dist[inside] == 0.0)
    assert np.all(dist[~inside] > 0.0)


@pytest.mark.parametrize("r", [2, 3, 12])
def test_distance_matches_quadprog(r):
    """A second, independent reference: Goldfarb-Idnani's dual active set as quadprog implements it."""
    rng = np.random.default_rng(31 * r)
    n, K = 20, 10 * r
    U, b, c = random_polytopes(rng, n, r, K)
    Z = c + rng.standard_normal((n, r)) * rng.choice([0.3, 1.0, 4.0], size=(n, 1))
    dist, proj = polytope_distance(U, b, Z, return_projection=True)
    for i in range(n):
        # min 1/2 |a|^2 - z.a  s.t.  U a >= b_i   <=>   min |a - z|^2 over the polytope
        a_ref = quadprog.solve_qp(np.eye(r), Z[i], U.T.copy(), b[i].copy(), 0)[0]
        np.testing.assert_allclose(proj[i], a_ref, atol=1e-7)
        assert dist[i] == pytest.approx(np.linalg.norm(a_ref - Z[i]), abs=1e-7)


@pytest.mark.parametrize("r", [2, 3, 5, 12])
@pytest.mark.parametrize("degenerate", [None, "duplicate", "parallel", "vertex"])
def test_projection_is_feasible_and_kkt_optimal(r, degenerate):
    rng = np.random.default_rng(7 * r + 1)
    n, K = 60, 300
    U, b, c = random_polytopes(rng, n, r, K, degenerate)
    Z = c + 3.0 * rng.standard_normal((n, r))
    dist, A = polytope_distance(U, b, Z, return_projection=True)
    assert (A @ U.T - b).min() >= -1e-8
    np.testing.assert_allclose(dist, np.linalg.norm(A - Z, axis=1), atol=1e-12)
    residuals = [kkt_residual(U, b[i], Z[i], A[i]) for i in range(n)]
    assert max(residuals) <= 1e-8
    np.testing.assert_array_equal(project_onto_polytope(U, b, Z), A)


def test_scale_invariance_and_nonunit_directions():
    """Rescaling a row of U together with b leaves the region and the answer unchanged."""
    rng = np.random.default_rng(3)
    U, b, c = random_polytopes(rng, 20, 4, 50)
    Z = c + 2 * rng.standard_normal(c.shape)
    s = rng.uniform(0.1, 10.0, size=U.shape[0])
    d0 = polytope_distance(U, b, Z)
    d1 = polytope_distance(U * s[:, None], b * s, Z)
    np.testing.assert_allclose(d1, d0, atol=1e-10)


def test_torch_matches_numpy():
    rng = np.random.default_rng(5)
    U, b, c = random_polytopes(rng, 200, 6, 400, "duplicate")
    Z = c + 2 * rng.standard_normal(c.shape)
    d_np, a_np = polytope_distance(U, b, Z, return_projection=True)
    d_t, a_t = polytope_distance(torch.tensor(U), torch.tensor(b), torch.tensor(Z), return_projection=True)
    assert isinstance(d_t, torch.Tensor) and d_t.dtype == torch.float64
    np.testing.assert_allclose(d_t.numpy(), d_np, atol=1e-12)
    np.testing.assert_allclose(a_t.numpy(), a_np, atol=1e-12)


def test_warm_start_gives_the_cold_answer():
    rng = np.random.default_rng(11)
    U, b, c = random_polytopes(rng, 300, 8, 500)
    Z = c + 2 * rng.standard_normal(c.shape)
    U_t, b_t, Z_t = P._prepare(U, b, Z)
    cold = P._solve(U_t, b_t, Z_t)
    Z2 = Z_t + 0.05 * torch.randn(Z_t.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    ref = P._solve(U_t, b_t, Z2)
    warm = P._solve(U_t, b_t, Z2, warm=(cold.A, cold.m))
    torch.testing.assert_close(warm.X, ref.X, atol=1e-10, rtol=0)


def test_broadcast_thresholds_and_empty_batch():
    rng = np.random.default_rng(2)
    U, b, c = random_polytopes(rng, 1, 3, 20)
    Z = c + rng.standard_normal((5, 3))
    full = polytope_distance(U, np.repeat(b, 5, axis=0), Z)
    np.testing.assert_allclose(polytope_distance(U, np.broadcast_to(b[0], (5, 20)), Z), full)
    np.testing.assert_allclose(polytope_distance(U, b[0], Z), full)
    assert polytope_distance(U, np.zeros((0, 20)), np.zeros((0, 3))).shape == (0,)


# --------------------------------------------------------------------------- empty regions and bad input


@pytest.mark.parametrize("r", [2, 3, 12])
def test_empty_region_names_the_row(r):
    rng = np.random.default_rng(r)
    U, b, c = random_polytopes(rng, 10, r, 20 * r)
    b[3] = 1.0  # u_k·a >= 1 for directions that positively span R^r: empty
    Z = rng.standard_normal((10, r))
    with pytest.raises(EmptyRegionError, match=r"row 3 \(x index 3\)") as info:
        polytope_distance(U, b, Z)
    assert info.value.index == 3 and isinstance(info.value, ValueError)


def test_empty_slab_and_nan_input():
    U = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]])
    b = np.array([[0.0, -1.0, 0.0], [1.0, -1.0 + 1e-6, 0.0]])  # row 1: 1 <= a_0 <= 1 − 1e-6
    with pytest.raises(EmptyRegionError) as info:
        polytope_distance(U, b, np.zeros((2, 2)))
    assert info.value.index == 1
    with pytest.raises(ValueError, match="NaN"):
        polytope_distance(U, np.full((2, 3), np.nan), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="shape"):
        polytope_distance(U, b, np.zeros((2, 3)))


# --------------------------------------------------------------------------- S^γ projection


def region_projection_qp(U, b_row, gamma, y):
    z, a = cp.Variable(U.shape[1]), cp.Variable(U.shape[1])
    cons = [U @ a >= b_row, cp.norm(z - a) <= gamma]
    cp.Problem(cp.Minimize(cp.sum_squares(z - y)), cons).solve(**CLARABEL_SOCP)
    return z.value


@pytest.mark.parametrize("r", [2, 5])
def test_project_onto_region_is_nearest_point_of_s_gamma(r):
    rng = np.random.default_rng(40 + r)
    n = 15
    U, b, c = random_polytopes(rng, n, r, 12 * r)
    Y = c + rng.standard_normal((n, r)) * rng.choice([0.1, 1.0, 3.0], size=(n, 1))
    gamma = rng.uniform(0.0, 0.8, size=n)
    gamma[0] = 0.0
    out = project_onto_region(U, b, gamma, Y)
    dist_y = polytope_distance(U, b, Y)
    assert np.all(polytope_distance(U, b, out) <= gamma + 1e-8)
    inside = dist_y <= gamma
    assert np.array_equal(out[inside], Y[inside])
    ref = np.array([region_projection_qp(U, b[i], gamma[i], Y[i]) for i in range(n)])
    # Optimal value first (the solver's point is only accurate to ~1e-5 where the
    # optimum is flat); quadratic growth then bounds ‖out − ref‖² by the value gap.
    ours, theirs = np.linalg.norm(out - Y, axis=1), np.linalg.norm(ref - Y, axis=1)
    np.testing.assert_allclose(ours, theirs, atol=1e-7)
    assert np.all(ours <= theirs + 1e-9)
    np.testing.assert_allclose(out, ref, atol=1e-4)
    np.testing.assert_allclose(project_onto_region(U, b, 0.0, Y), project_onto_polytope(U, b, Y))


def test_project_onto_region_brute_force_r2():
    """On a dense grid no point of S^γ is closer to y than the projection."""
    rng = np.random.default_rng(9)
    U, b, c = random_polytopes(rng, 1, 2, 7)
    gamma = 0.3
    g = np.linspace(-4, 4, 401)
    grid = np.stack(np.meshgrid(g, g), -1).reshape(-1, 2) + c
    member = polytope_distance(U, np.broadcast_to(b[0], (len(grid), 7)), grid) <= gamma
    for y in c + rng.standard_normal((5, 2)) * 2:
        z = project_onto_region(U, b, gamma, y[None])[0]
        best = np.linalg.norm(grid[member] - y, axis=1).min()
        assert np.linalg.norm(z - y) <= best + 1e-9
        assert best - np.linalg.norm(z - y) <= 0.03  # grid spacing 0.02


def test_project_onto_region_torch_and_sign():
    """Outside S^γ the result lies between a* and y at distance γ from R (not beyond a*)."""
    U = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
    b = np.array([[0.0, -1.0, 0.0, -1.0]])  # unit square
    y = torch.tensor([[3.0, 0.5]], dtype=torch.float64)
    out = project_onto_region(torch.tensor(U), torch.tensor(b), 0.5, y)
    assert isinstance(out, torch.Tensor)
    torch.testing.assert_close(out, torch.tensor([[1.5, 0.5]], dtype=torch.float64))


# --------------------------------------------------------------------------- reliability


def box_halfspaces(lo: np.ndarray, hi: np.ndarray):
    r = lo.shape[1]
    U = np.vstack([np.eye(r), -np.eye(r)])
    return U, np.hstack([lo, -hi])


def identity_decode(z, x):
    return z


def neg_sq_dist(y, gt):
    return -((y - gt) ** 2).sum(dim=1)


def test_reliability_box_matches_dense_grid():
    """Identity decoder, ρ = −‖z − gt‖²: the worst point is the farthest point of S^γ."""
    rng = np.random.default_rng(0)
    n, gamma = 6, 0.3
    lo = rng.uniform(-1, 0, (n, 2))
    hi = lo + rng.uniform(0.5, 1.5, (n, 2))
    gt = lo - rng.uniform(0.1, 1.0, (n, 2))  # below-left of the box: one global maximiser
    U, b = box_halfspaces(lo, hi)
    scores, z = reliability_score(
        identity_decode, neg_sq_dist, CalibratedRegions(U, b, gamma), gt, search=SearchSettings(steps=100, seed=1)
    )
    assert np.all(polytope_distance(U, b, z) <= gamma + 1e-8)
    for i in range(n):
        g = np.linspace(-2.5, 2.5, 501)
        grid = np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)
        member = polytope_distance(U, np.broadcast_to(b[i], (len(grid), 4)), grid) <= gamma
        brute = -(((grid[member] - gt[i]) ** 2).sum(axis=1)).max()
        exact = -((np.linalg.norm(hi[i] - gt[i]) + gamma) ** 2)
        assert scores[i] <= brute + 1e-9  # at least as bad as any grid point
        assert scores[i] == pytest.approx(exact, abs=1e-6)
        np.testing.assert_allclose(-((z[i] - gt[i]) ** 2).sum(), scores[i], atol=1e-12)


def test_reliability_is_below_random_feasible_points_and_seeded():
    rng = np.random.default_rng(1)
    n, r, gamma = 20, 3, 0.2
    lo = rng.uniform(-1, 0, (n, r))
    hi = lo + rng.uniform(0.2, 1.0, (n, r))
    U, b = box_halfspaces(lo, hi)
    W = torch.tensor(rng.standard_normal((r, 4)))

    def decode(z, x):
        return torch.tanh(z @ W) + 0.1 * x

    def sim(y, target):
        return -((y - target) ** 2).sum(dim=1)

    x = rng.standard_normal((n, 4))
    target = rng.standard_normal((n, 4))
    s1, z1 = reliability_score(
        decode, sim, CalibratedRegions(U, b, gamma), target, x=x, search=SearchSettings(num_z0=20, steps=30, seed=3)
    )
    s2, z2 = reliability_score(
        decode, sim, CalibratedRegions(U, b, gamma), target, x=x, search=SearchSettings(num_z0=20, steps=30, seed=3)
    )
    assert np.array_equal(s1, s2) and np.array_equal(z1, z2)
    assert np.all(polytope_distance(U, b, z1) <= gamma + 1e-8)
    with torch.no_grad():
        val = sim(decode(torch.tensor(z1), torch.tensor(x)), torch.tensor(target)).numpy()
    np.testing.assert_allclose(val, s1, atol=1e-12)
    # random feasible points (uniform in the box, then anywhere in S^γ via projection): PGD is a
    # local method (Sec. 3.3), so a rare random point may beat it, but it must beat almost all,
    # and a search that climbed instead of descended would beat almost none.
    below = []
    for _ in range(20):
        pts = project_onto_region(U, b, gamma, rng.uniform(lo - 0.5, hi + 0.5))
        with torch.no_grad():
            v = sim(decode(torch.tensor(pts), torch.tensor(x)), torch.tensor(target)).numpy()
        below.append(s1 <= v + 1e-12)
    assert np.mean(below) >= 0.97


def test_reliability_batches_agree_with_one_batch():
    rng = np.random.default_rng(2)
    lo = rng.uniform(-1, 0, (7, 2))
    U, b = box_halfspaces(lo, lo + 1.0)
    gt = rng.standard_normal((7, 2))
    kw = dict(steps=20, num_z0=100, refine_top=4)  # enough starts that PGD (local) finds every global worst case
    one, _ = reliability_score(
        identity_decode, neg_sq_dist, CalibratedRegions(U, b, 0.1), gt, search=SearchSettings(batch_size=7, **kw)
    )
    # same procedure, different random draws per batch: both must reach the exact worst case
    many, z = reliability_score(
        identity_decode, neg_sq_dist, CalibratedRegions(U, b, 0.1), gt, search=SearchSettings(batch_size=3, **kw)
    )
    assert np.all(polytope_distance(U, b, z) <= 0.1 + 1e-8)
    # the farthest point of the 0.1-enlarged box from gt: its farthest corner, pushed out by 0.1
    far = np.maximum(np.abs(gt - lo), np.abs(gt - lo - 1.0))
    exact = -((np.linalg.norm(far, axis=1) + 0.1) ** 2)
    np.testing.assert_allclose(one, exact, rtol=1e-6)
    np.testing.assert_allclose(many, exact, rtol=1e-6)


def test_reliability_names_the_empty_row_across_batches():
    rng = np.random.default_rng(4)
    lo = rng.uniform(-1, 0, (9, 2))
    U, b = box_halfspaces(lo, lo + 1.0)
    b[7, 0] = 5.0  # a_0 >= 5 and a_0 <= lo + 1 < 1
    with pytest.raises(EmptyRegionError, match=r"row 7 \(x index 7\)") as info:
        reliability_score(
            identity_decode,
            neg_sq_dist,
            CalibratedRegions(U, b, 0.1),
            np.zeros((9, 2)),
            search=SearchSettings(steps=2, batch_size=4),
        )
    assert info.value.index == 7


def test_one_dimensional_latent():
    U = np.array([[1.0], [-1.0]])
    b = np.array([[0.0, -1.0], [2.0, -3.0]])  # [0, 1] and [2, 3]
    d = polytope_distance(U, b, np.array([[1.5], [1.5]]))
    np.testing.assert_allclose(d, [0.5, 0.5])


def test_reliability_reports_progress_in_a_log_unless_silenced(capsys):
    """Under Snakemake stderr is the job's log, not a terminal: the PGD still reports its batches there."""
    lo = np.zeros((4, 2))
    U, b = box_halfspaces(lo, lo + 1.0)
    gt = lo - 0.5
    reliability_score(
        identity_decode, neg_sq_dist, CalibratedRegions(U, b, 0.1), gt, search=SearchSettings(steps=3, batch_size=2)
    )
    assert "CReL reliability: 100%" in capsys.readouterr().err
    quiet = SearchSettings(steps=3, batch_size=2, progress=False)
    reliability_score(identity_decode, neg_sq_dist, CalibratedRegions(U, b, 0.1), gt, search=quiet)
    assert "CReL reliability" not in capsys.readouterr().err

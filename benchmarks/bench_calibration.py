"""Benchmark A: exact CReL calibration distances and the reliability score.

Times, in one run and on the same inputs,

* ``polytope_distance`` (batched Goldfarb–Idnani) for n_cal points at each
  latent dimension r, against a generic per-sample QP solver (cvxpy +
  Clarabel, one problem per point) timed on a subsample and extrapolated to
  n_cal; the maximum |error| on the subsample is reported;
* ``reliability_score`` for n points with a small MLP decoder (r → d = 2),
  against a naive per-sample loop (one point at a time) on a subsample,
  extrapolated.

Inputs are realistic DQR-like regions: unit Gaussian directions u_k, offsets
``b[i, k] = u_k·c_i − h(u_k) + noise`` with ``h(u) = sqrt(uᵀ Σ u)`` the support
function of a random ellipsoid (so every region contains the ellipsoid
``c_i + Σ^{1/2} B`` and is non-empty), and ``Z = c_i + s Σ^{1/2} ξ`` with the
scale s set so that about half the points lie inside their region.

Other baselines (e.g. the Feldman et al. grid) plug in through
:data:`BASELINE_HOOKS`: a callable ``hook(U, b, Z) -> dict`` registered under a
name is called for every r on the same inputs and its dict is stored in the
JSON under ``results[r]["baselines"][name]``.

Usage::

    python benchmarks/bench_calibration.py [--out benchmarks/out/calibration.json]
        [--device cpu|cuda] [--dims 2 4 8 12] [--n-cal 4000] [--K 2048]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from condeval.core.io import write_json
from condeval.core.settings import SearchSettings
from condeval.crel import polytope as P
from condeval.crel.polytope import polytope_distance
from condeval.crel.reliability import CalibratedRegions, reliability_score
from condeval.crel.scaling import CalibrationRegions, time_latent_grid_chunks

#: Extra calibration baselines: name -> callable(U, b, Z) returning a JSON-able dict
#: (e.g. {"seconds": ..., "max_abs_error": ...}); filled in by other benchmark modules.
BASELINE_HOOKS: dict[str, Callable[[np.ndarray, np.ndarray, np.ndarray], dict]] = {}


# --------------------------------------------------------------------------- inputs


def make_problem(n: int, K: int, r: int, seed: int, noise: float = 0.01):
    """Directions U (K, r), offsets b (n, K), points Z (n, r) with ~half inside."""
    rng = np.random.default_rng(seed)
    U = rng.standard_normal((K, r))
    U /= np.linalg.norm(U, axis=1, keepdims=True)
    A = rng.standard_normal((r, r))
    Sigma = A @ A.T / r + 0.1 * np.eye(r)
    h = np.sqrt(np.einsum("kr,rs,ks->k", U, Sigma, U))
    C = rng.standard_normal((n, r))
    b = C @ U.T - h[None, :] + noise * rng.standard_normal((n, K))
    W = rng.standard_normal((n, r)) @ np.linalg.cholesky(Sigma).T  # directions Σ^{1/2} ξ
    reach = _ray_reach(U, b, C, W)  # C + t W stays inside for t <= reach
    Z = C + float(np.median(reach)) * W
    return U, b, Z


def _ray_reach(U, b, C, W):
    slack = C @ U.T - b  # > 0: h(u) >> noise
    uw = W @ U.T
    with np.errstate(divide="ignore"):
        ratio = np.where(uw < 0, slack / -uw, np.inf)
    return ratio.min(axis=1)


# --------------------------------------------------------------------------- calibration


def qp_distances(U, b, Z) -> tuple[np.ndarray, float]:
    """Per-sample reference: one cvxpy/Clarabel QP per point (seconds, distances)."""
    import cvxpy as cp

    r = U.shape[1]
    a, z, bb = cp.Variable(r), cp.Parameter(r), cp.Parameter(U.shape[0])
    prob = cp.Problem(cp.Minimize(cp.sum_squares(a - z)), [U @ a >= bb])
    out = np.empty(len(Z))
    t0 = time.perf_counter()
    for i in range(len(Z)):
        z.value, bb.value = Z[i], b[i]
        prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
        out[i] = np.linalg.norm(a.value - Z[i])
    return out, time.perf_counter() - t0


def time_polytope(U, b, Z, backend: str, repeats: int) -> tuple[np.ndarray, list[float]]:
    """Wall-clock seconds of ``polytope_distance``: ``"numpy"`` arrays, or torch tensors on ``"cpu"``/``"cuda"``."""
    if backend == "numpy":
        args = (U, b, Z)
    else:
        args = tuple(torch.as_tensor(a, device=backend) for a in (U, b, Z))
    sync = torch.cuda.synchronize if backend == "cuda" else (lambda: None)
    polytope_distance(*(a[:50] if i else a for i, a in enumerate(args)))  # warm-up
    sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        d = polytope_distance(*args)
        sync()
        times.append(time.perf_counter() - t0)
    d = d.cpu().numpy() if isinstance(d, torch.Tensor) else d
    return d, times


def _timing(backend: str, times: list[float]) -> dict:
    return {
        "backend": backend,
        "seconds_min": min(times),
        "seconds_median": statistics.median(times),
        "seconds_all": times,
    }


def bench_calibration(args) -> dict:
    results = {}
    for r in args.dims:
        U, b, Z = make_problem(args.n_cal, args.K, r, seed=args.seed + r)
        dist, times = time_polytope(U, b, Z, "numpy", args.repeats)
        dist_torch, times_torch = time_polytope(U, b, Z, args.device, args.repeats)
        sub = np.random.default_rng(args.seed).choice(args.n_cal, args.ref_subsample, replace=False)
        ref, ref_seconds = qp_distances(U, b[sub], Z[sub])
        entry = {
            "r": r,
            "n_cal": args.n_cal,
            "K": args.K,
            "inside_fraction": float(np.mean(dist == 0.0)),
            "polytope_distance": _timing("numpy", times),
            "polytope_distance_torch": _timing(f"torch-{args.device}", times_torch),
            "per_sample_qp": {
                "solver": "cvxpy/CLARABEL, one QP per point (parametrized problem, tol 1e-10)",
                "subsample": int(args.ref_subsample),
                "seconds_subsample": ref_seconds,
                "seconds_extrapolated": ref_seconds * args.n_cal / args.ref_subsample,
                "extrapolated": True,
            },
            "max_abs_error_vs_qp": float(np.max(np.abs(dist[sub] - ref))),
            "max_abs_error_torch_vs_qp": float(np.max(np.abs(dist_torch[sub] - ref))),
            "baselines": {name: hook(U, b, Z) for name, hook in BASELINE_HOOKS.items()},
        }
        entry["speedup_vs_qp"] = entry["per_sample_qp"]["seconds_extrapolated"] / min(times)
        entry["speedup_torch_vs_qp"] = entry["per_sample_qp"]["seconds_extrapolated"] / min(times_torch)
        results[str(r)] = entry
        _print_calibration_row(entry)
    return results


def _print_calibration_row(e: dict) -> None:
    p, t, q = e["polytope_distance"], e["polytope_distance_torch"], e["per_sample_qp"]
    grid = e["baselines"].get("feldman_grid", {}).get("seconds_extrapolated", float("nan"))
    print(
        f"{e['r']:>3} {e['n_cal']:>6} {e['K']:>5} {e['inside_fraction']:>7.2f} "
        f"{p['seconds_min']:>9.3f} {p['seconds_median']:>9.3f} {t['seconds_min']:>9.3f} {q['seconds_extrapolated']:>11.1f} "
        f"{e['speedup_vs_qp']:>9.0f} {e['max_abs_error_vs_qp']:>10.2e} {grid:>13.4g}",
        flush=True,
    )


# --------------------------------------------------------------------------- Feldman grid


def feldman_grid_hook(U, b, Z, *, points_per_axis: int = 5, chunk: int = 2**18, budget_s: float = 20.0) -> dict:
    """Time Feldman et al.'s grid calibration on the same regions (Appendix D–E).

    A global latent grid of m points per axis (m^r points, m = 5 as in Appendix E) over the
    range of the codes is filtered per calibration point by the region's half-spaces, the
    members are decoded by the benchmark's MLP decoder, and the score is the distance of the
    decoded code of Z[i] to the nearest decoded member. Grid chunks are timed until
    ``budget_s`` is spent, then the time is extrapolated to all chunks of all n points
    (:func:`condeval.crel.scaling.time_latent_grid_chunks`, shared with the workflow's Fig. 8).
    """
    decoder = make_decoder(Z.shape[1])
    with torch.no_grad():
        targets = decoder(torch.as_tensor(Z, dtype=torch.float32)).numpy()
    return time_latent_grid_chunks(
        CalibrationRegions(U, b, lambda z, x: decoder(z), targets),
        Z.min(axis=0),
        Z.max(axis=0),
        points_per_axis,
        chunk=chunk,
        budget_s=budget_s,
    )


BASELINE_HOOKS["feldman_grid"] = feldman_grid_hook


# --------------------------------------------------------------------------- reliability


def make_decoder(r: int, d: int = 2, hidden: int = 64, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(r, hidden),
        torch.nn.Tanh(),
        torch.nn.Linear(hidden, hidden),
        torch.nn.Tanh(),
        torch.nn.Linear(hidden, d),
    ).eval()


def bench_reliability(args) -> dict:
    r = args.rel_dim
    U, b, Z = make_problem(args.rel_n, args.K, r, seed=args.seed + 1000)
    gamma = float(np.quantile(polytope_distance(U, b, Z), 0.9))
    d = args.rel_out_dim
    mlp = make_decoder(r, d=d, hidden=args.rel_hidden, seed=args.seed)
    for p in mlp.parameters():
        p.requires_grad_(False)

    def decode(z, x):
        return mlp(z.float()).double()

    def similarity(y, gt):
        return -((y - gt) ** 2).sum(dim=1)

    with torch.no_grad():
        gt = decode(torch.as_tensor(Z), None).numpy() + 0.1 * np.random.default_rng(0).standard_normal((len(Z), d))
    kw = dict(search=SearchSettings(num_z0=args.num_z0, steps=args.steps, lr=args.lr, seed=args.seed, progress=False))
    t0 = time.perf_counter()
    scores, z_worst = reliability_score(decode, similarity, CalibratedRegions(U, b, gamma), gt, **kw)
    batched = time.perf_counter() - t0
    m = args.rel_naive_subsample
    t0 = time.perf_counter()
    naive_scores = [
        reliability_score(decode, similarity, CalibratedRegions(U, b[i : i + 1], gamma), gt[i : i + 1], **kw)[0][0]
        for i in range(m)
    ]
    naive = time.perf_counter() - t0
    with torch.no_grad():
        at_z = similarity(decode(torch.as_tensor(z_worst), None), torch.as_tensor(gt)).numpy()
    out = {
        "r": r,
        "n": args.rel_n,
        "K": args.K,
        "d": d,
        "gamma": gamma,
        "num_z0": args.num_z0,
        "steps": args.steps,
        "lr": args.lr,
        "decoder": f"MLP r-{args.rel_hidden}-{args.rel_hidden}-{d} tanh, float32",
        "batched": {"seconds": batched, "batch_size": 1024},
        "naive_per_sample_loop": {
            "subsample": m,
            "seconds_subsample": naive,
            "seconds_extrapolated": naive * args.rel_n / m,
            "extrapolated": True,
        },
        "max_distance_of_z_worst_minus_gamma": float((polytope_distance(U, b, z_worst) - gamma).max()),
        "max_abs_score_minus_similarity_at_z_worst": float(np.abs(scores - at_z).max()),
        "mean_score": float(scores.mean()),
        "mean_score_naive_subsample": float(np.mean(naive_scores)),
    }
    out["speedup_vs_naive"] = out["naive_per_sample_loop"]["seconds_extrapolated"] / batched
    return out


# --------------------------------------------------------------------------- main


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="benchmarks/out/calibration.json", help="JSON output path")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="device of the torch path")
    ap.add_argument("--dims", type=int, nargs="+", default=[2, 4, 8, 12])
    ap.add_argument("--n-cal", type=int, default=4000)
    ap.add_argument("--K", type=int, default=2048)
    ap.add_argument("--ref-subsample", type=int, default=100, help="points solved by the per-sample QP")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    ap.add_argument(
        "--solver-threads",
        type=int,
        default=P.SOLVER_CPU_THREADS,
        help="threads inside the CPU projection loop (0 = use --threads)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-reliability", action="store_true")
    ap.add_argument("--rel-n", type=int, default=4000)
    ap.add_argument("--rel-dim", type=int, default=12)
    ap.add_argument("--rel-naive-subsample", type=int, default=8)
    ap.add_argument("--rel-out-dim", type=int, default=2, help="decoder output width d (paper image-to-text: 768)")
    ap.add_argument("--rel-hidden", type=int, default=64, help="decoder hidden width")
    ap.add_argument("--num-z0", type=int, default=50)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--lr", type=float, default=0.05)
    return ap.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    P.SOLVER_CPU_THREADS = args.solver_threads or None
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda requested but torch.cuda.is_available() is False")
    print(
        f"# Benchmark A: torch {torch.__version__}, {args.threads} torch threads, "
        f"solver threads {P.SOLVER_CPU_THREADS or args.threads}, device {args.device}"
    )
    print(f"# per-sample QP timed on {args.ref_subsample} points per r and extrapolated to n_cal")
    print("  r  n_cal     K  inside  numpy min numpy med torch min  QP s (extr)   speedup    max|err|  grid s (extr)")
    report = {
        "benchmark": "A: calibration distances (exact) and reliability score",
        "machine": {
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "torch": torch.__version__,
            "torch_threads": args.threads,
            "solver_cpu_threads": P.SOLVER_CPU_THREADS,
            "device": args.device,
            "cuda_device": torch.cuda.get_device_name() if args.device == "cuda" else None,
        },
        "note": "per-sample QP and naive reliability times are measured on a subsample and "
        "extrapolated linearly to the full n (fields 'seconds_extrapolated').",
        "calibration": bench_calibration(args),
    }
    if not args.skip_reliability:
        rel = bench_reliability(args)
        report["reliability"] = rel
        print(
            f"# reliability_score: n={rel['n']} r={rel['r']} K={rel['K']} num_z0={rel['num_z0']} "
            f"steps={rel['steps']}: batched {rel['batched']['seconds']:.1f} s; naive per-sample loop "
            f"{rel['naive_per_sample_loop']['seconds_extrapolated']:.0f} s (extrapolated from "
            f"{rel['naive_per_sample_loop']['subsample']} points); speedup {rel['speedup_vs_naive']:.0f}x"
        )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json(report, out)
    print(f"# wrote {out}")
    return report


if __name__ == "__main__":
    main()

"""Benchmark D: CReL calibration and CReL-ρ at the image-to-text paper's sizes, through the public API.

The paper's shapes (Section 4.2): features p = d = 768 (CLIP ViT-L/14 image, BERT-base [CLS]),
the DQR's condition p + d = 1,536, latent r = 50, K = 2,048 directions, VAE widths
[128, 256, 512, 512, 256, 128] with dropout 0.1 and batch norm, n_cal = n_test = 2,025 (5% of
40,504). The models are freshly initialised (their weights do not change the cost); the features
are random unit rows of those widths.

* Exact distances: ``polytope_distance`` for 2,025 codes at r = 50, K = 2,048, on DQR-like regions
  (``bench_calibration.make_problem``: about half the codes outside their region, so the active
  set is exercised), against a per-sample QP (cvxpy + Clarabel, one problem per point) on a
  subsample, extrapolated; the largest distance error on the subsample is reported.
* The whole ``CReL.calibrate`` (encode, DQR offsets f(x, u_k) for every point and direction, exact
  distances) with fresh models of the paper's widths: the DQR offsets dominate it, n · K
  evaluations of the DQR network.
* CReL-ρ: ``CReL.reliability`` for 2,025 test points with num_z0 = 50 and 100 PGD steps, cosine ρ.

Usage::

    python benchmarks/bench_paper_scale.py [--threads 2] [--out benchmarks/out/paper_scale.json]
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_calibration import make_problem, qp_distances  # noqa: E402

from condeval.core.io import write_json  # noqa: E402
from condeval.core.settings import SearchSettings
from condeval.crel import CReL, polytope_distance  # noqa: E402
from condeval.crel.models.dqr import DirectionalQuantileRegressor  # noqa: E402
from condeval.crel.models.vae import LatentVAE  # noqa: E402


def _unit_rows(rng, n, width):
    rows = rng.normal(size=(n, width))
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n", type=int, default=2025, help="calibration and test points (5% of 40,504)")
    ap.add_argument("--r", type=int, default=50)
    ap.add_argument("--K", type=int, default=2048)
    ap.add_argument("--qp-subsample", type=int, default=40)
    ap.add_argument("--num-z0", type=int, default=50)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="benchmarks/out/paper_scale.json")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    p = d = 768
    vae = LatentVAE(
        output_dim=d,
        latent_dim=args.r,
        hidden_dims=[128, 256, 512, 512, 256, 128],
        metric="cosine",
        dropout=0.1,
        batch_norm=True,
    )
    dqr = DirectionalQuantileRegressor(cond_dim=p + d, latent_dim=args.r, hidden_dims=[256, 256], n_directions=args.K)
    crel = CReL.from_models(vae, dqr, metric="cosine")
    X_cal, Y_cal = _unit_rows(rng, args.n, p + d), _unit_rows(rng, args.n, d)
    X_test, GT_test = _unit_rows(rng, args.n, p + d), _unit_rows(rng, args.n, d)

    U, b, Z = make_problem(args.n, args.K, args.r, seed=0)
    polytope_distance(U, b[:50], Z[:50])  # warm-up
    times = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        scores = polytope_distance(U, b, Z)
        times.append(time.perf_counter() - started)
    m = args.qp_subsample
    reference, qp_seconds = qp_distances(U, b[:m], Z[:m])
    calibration = {
        "seconds_median": float(np.median(times)),
        "seconds_all": times,
        "outside_fraction": float(np.mean(scores > 0)),
        "qp_subsample": m,
        "qp_seconds_extrapolated": qp_seconds * args.n / m,
        "max_abs_error_vs_qp": float(np.abs(reference - scores[:m]).max()),
    }
    calibration["speedup_vs_qp"] = calibration["qp_seconds_extrapolated"] / calibration["seconds_median"]
    started = time.perf_counter()
    crel.calibrate(X_cal, Y_cal, alpha=0.1)
    pipeline = {
        "seconds": time.perf_counter() - started,
        "dqr_hidden": [256, 256],
        "vae_hidden": [128, 256, 512, 512, 256, 128],
    }

    started = time.perf_counter()
    worst, _ = crel.reliability(X_test, GT_test, search=SearchSettings(num_z0=args.num_z0, steps=args.steps))
    reliability = {
        "seconds": time.perf_counter() - started,
        "num_z0": args.num_z0,
        "steps": args.steps,
        "mean_crel_rho": float(worst.mean()),
    }

    out = {
        "shapes": {"p": p, "d": d, "r": args.r, "K": args.K, "n_cal": args.n, "n_test": args.n},
        "threads": args.threads,
        "cpu": platform.processor() or platform.machine(),
        "calibration": calibration,
        "calibrate_pipeline": pipeline,
        "reliability": reliability,
    }
    write_json(out, args.out)
    print(
        f"calibrate: {calibration['seconds_median']:.3f} s (per-sample QP extrapolated {calibration['qp_seconds_extrapolated']:.1f} s, "
        f"x{calibration['speedup_vs_qp']:.0f}; max |error| {calibration['max_abs_error_vs_qp']:.1e}; outside {calibration['outside_fraction']:.2f})"
    )
    print(f"CReL.calibrate with the models: {pipeline['seconds']:.1f} s")
    print(
        f"reliability: {reliability['seconds']:.1f} s for {args.n} points, num_z0 = {args.num_z0}, {args.steps} steps"
    )
    return out


if __name__ == "__main__":
    main()

"""Benchmark F: the trust score's throughput and KID's cost at the paper's feature width.

- ``TrustScorer.score`` on ``--samples`` (100,000) samples at D = ``--dim`` (768) after fitting on
  ``--real`` real rows with four binary attributes; samples per second (the issue's bar: at least
  100,000 on 2 cores). The baseline in the same run is the score as the definition reads: one float64
  quadratic form (a matrix product over all rows) for realism and for every attribute value, on 5,000
  rows (what the margin identity and the float32 blocks save).
- ``kid`` with 500-row subsets × 10 at D = 768 against torchmetrics' ``KernelInceptionDistance``
  (features through an identity "extractor") on the same features, same subset sizes; both the time
  and the two values (their kernels differ: ours is the official cosine kernel, torchmetrics' the
  standard one, so ``kid(kernel="standard")`` is timed too and is the like-for-like row).

Usage::

    python benchmarks/bench_trust.py [--samples 100000] [--dim 768] [--threads 2] [--out benchmarks/out/trust.json]
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np
import torch

from condeval.core.io import write_json
from condeval.metrics import kid, unit_rows
from condeval.trust import TrustScorer


def _timed(function, *args, **kwargs):
    started = time.perf_counter()
    out = function(*args, **kwargs)
    return out, time.perf_counter() - started


def _world(n: int, dim: int, seed: int):
    rng = np.random.default_rng(seed)
    attributes = rng.integers(0, 2, (n, 4))
    effects = np.random.default_rng(99).standard_normal((4, dim))
    return (rng.standard_normal((n, dim)) + attributes @ effects).astype(np.float32), attributes


def _definition(scorer: TrustScorer, samples: np.ndarray) -> list[np.ndarray]:
    """Realism and every value's energy as the definition reads: one float64 quadratic form (a matrix
    product) per energy, all rows at once."""
    z = unit_rows(samples)

    def quadratic(centred, precision):
        return ((centred @ precision) * centred).sum(axis=1)

    energies = [quadratic(z - scorer.mean_, scorer.precision_)]
    for means, precision in zip(scorer.value_means_, scorer.attribute_precisions_, strict=True):
        energies += [quadratic(z - m, precision) for m in means]
    return energies


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=100_000)
    ap.add_argument("--real", type=int, default=20_000)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default="benchmarks/out/trust.json")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    real, real_attributes = _world(args.real, args.dim, seed=0)
    samples, attributes = _world(args.samples, args.dim, seed=1)
    scorer, fit_s = _timed(TrustScorer().fit, real, real_attributes)
    scorer.score(samples[:1024], attributes[:1024])  # warm-up
    _, score_s = _timed(scorer.score, samples, attributes)
    baseline_rows = min(args.samples, 5_000)
    _, baseline_s = _timed(_definition, scorer, samples[:baseline_rows])
    out = {
        "cpu": platform.processor() or platform.machine(),
        "threads": args.threads,
        "dim": args.dim,
        "real_rows": args.real,
        "fit_s": fit_s,
        "samples": args.samples,
        "score_s": score_s,
        "samples_per_s": args.samples / score_s,
        "definition_baseline": {
            "rows": baseline_rows,
            "seconds": baseline_s,
            "samples_per_s": baseline_rows / baseline_s,
        },
    }
    out["speed_up"] = out["samples_per_s"] / out["definition_baseline"]["samples_per_s"]
    out["kid"] = _kid_rows(real, samples[: args.real])
    write_json(out, args.out)
    print(
        f"fit {fit_s:.1f} s; score {out['samples_per_s']:,.0f} samples/s "
        f"({out['speed_up']:.1f}x the definition's {out['definition_baseline']['samples_per_s']:,.0f}/s)"
    )
    for name, row in out["kid"].items():
        print(f"KID {name}: {row['seconds']:.2f} s, {row['mean']:.5f} ± {row['std']:.5f}")
    return out


def _kid_rows(real: np.ndarray, generated: np.ndarray) -> dict:
    from torchmetrics.image.kid import KernelInceptionDistance

    rows = {}
    for kernel in ("cosine", "standard"):
        (mean, std), seconds = _timed(kid, generated, real, subset_size=500, n_subsets=10, kernel=kernel)
        rows[f"condeval_{kernel}"] = {"mean": mean, "std": std, "seconds": seconds}
    metric = KernelInceptionDistance(feature=torch.nn.Identity(), subset_size=500, subsets=10)

    def torchmetrics_kid():
        metric.reset()
        metric.update(torch.as_tensor(real, dtype=torch.float64), real=True)
        metric.update(torch.as_tensor(generated, dtype=torch.float64), real=False)
        return metric.compute()

    (mean, std), seconds = _timed(torchmetrics_kid)
    rows["torchmetrics_standard"] = {"mean": float(mean), "std": float(std), "seconds": seconds}
    return rows


if __name__ == "__main__":
    main()

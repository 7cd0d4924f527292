"""Benchmark B's allocator check: the latent DQR's training step with the workflow's job environment.

Runs the same step (the image-to-text shape of config/config.yaml: conditions p = 192, r = 8,
hidden [64, 64], a batch of 256 points against 1,024 directions, forward and backward, one
thread) in two fresh processes: one with glibc's default allocator settings, one with
:data:`condeval.core.devices.JOB_ENVIRONMENT`, which every workflow job inherits. glibc reads
them only at start-up, hence the subprocesses.

Usage::

    python benchmarks/bench_allocator.py [--out benchmarks/out/allocator.json] [--steps 20]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys

from condeval.core.devices import JOB_ENVIRONMENT
from condeval.core.io import write_json

STEP = """
import json, time, torch
from condeval.crel.models.dqr import DirectionalQuantileRegressor
torch.set_num_threads(1)
torch.manual_seed(0)
model = DirectionalQuantileRegressor(192, 8, 0.1, [64, 64], 2048, 1024)
x, z = torch.randn(256, 192), torch.randn(256, 8)
def step():
    model.zero_grad()
    model._loss(x, z, model.directions[model.sample_direction_indices()]).backward()
for _ in range(3):
    step()
start = time.perf_counter()
for _ in range({steps}):
    step()
print(json.dumps({{"seconds_per_step": (time.perf_counter() - start) / {steps}}}))
"""


def _time_step(steps: int, environment: dict[str, str]) -> float:
    env = {k: v for k, v in os.environ.items() if k not in JOB_ENVIRONMENT} | environment
    result = subprocess.run(
        [sys.executable, "-c", STEP.format(steps=steps)], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(result.stdout.strip().splitlines()[-1])["seconds_per_step"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="benchmarks/out/allocator.json")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    default = _time_step(args.steps, {})
    tuned = _time_step(args.steps, dict(JOB_ENVIRONMENT))
    result = {
        "dqr_step_seconds": {"glibc_default": default, "job_environment": tuned},
        "speedup": default / tuned,
        "job_environment": JOB_ENVIRONMENT,
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count()},
    }
    write_json(result, args.out)
    print(
        f"DQR step: {default:.3f} s with glibc's defaults, {tuned:.3f} s with the job environment ({default / tuned:.1f}x)"
    )


if __name__ == "__main__":
    main()

"""Fig. 8 (CReL Appendix E): calibration timings, the grid scheme's budget, the figure and the workflow target."""

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import torch
import yaml

from condeval.crel import CReL
from condeval.crel.baselines.feldman import feldman_scores, feldman_threshold
from condeval.crel.models.dqr import DirectionalQuantileRegressor
from condeval.crel.models.vae import LatentVAE
from condeval.crel.reports.scaling import (
    PAPER_FIG8,
    plot_calibration_runtime,
    runtime_table,
)
from condeval.crel.scaling import (
    GridSettings,
    GridTiming,
    feldman_output_grid,
    infeasibility_point,
    output_grid_step,
    time_crel_calibration,
    time_grid_calibration,
)

REPO = Path(__file__).resolve().parents[2]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "-s", str(REPO / "workflow/Snakefile")]
N_CAL, R = 40, 2


@pytest.fixture()
def tiny():
    """An untrained VAE (d = 3, r = 2) and latent DQR, and a calibration fold whose codes often leave R_Z."""
    torch.manual_seed(0)
    vae = LatentVAE(output_dim=3, latent_dim=R, hidden_dims=[8, 8])
    dqr = DirectionalQuantileRegressor(
        cond_dim=4, latent_dim=R, hidden_dims=[8, 8], n_directions=64, directions_per_step=32
    )
    rng = np.random.default_rng(0)
    return CReL.from_models(vae, dqr), rng.normal(size=(N_CAL, 4)), 5 * rng.normal(size=(N_CAL, 3))


class _CountingDecoder:
    """Wraps ``crel.decode_torch``: counts decoded latent points, optionally sleeping per point."""

    def __init__(self, decode, seconds_per_point=0.0):
        self.decode, self.seconds_per_point, self.points = decode, seconds_per_point, 0

    def __call__(self, z, x=None):
        self.points += z.shape[0]
        time.sleep(self.seconds_per_point * z.shape[0])
        return self.decode(z, x)


def _grid_settings(**kw):
    return GridSettings(**{"max_output_points": 200, "probe_points": 4, **kw})


def test_slow_probe_is_extrapolated_and_the_rest_is_not_run(tiny):
    crel, X, Y = tiny
    crel.decode_torch = decoder = _CountingDecoder(crel.decode_torch, seconds_per_point=1e-3)
    result = time_grid_calibration(crel, X, Y, 0.1, _grid_settings(budget_s=0.05))
    per_region = 5**R + 1  # the m^r box grid plus one exact region point
    assert not result.feasible and result.reason == "budget"
    assert decoder.points == 4 * per_region  # only the probe was decoded
    assert result.probe_points == 4 and result.gamma is None
    assert result.total_s > 0.05 and result.total_s > result.measured_s
    assert result.total_s == pytest.approx(result.setup_s + (result.measured_s - result.setup_s) * N_CAL / 4)


def test_fast_run_is_measured_in_full(tiny):
    crel, X, Y = tiny
    crel.decode_torch = decoder = _CountingDecoder(crel.decode_torch)
    result = time_grid_calibration(crel, X, Y, 0.1, _grid_settings(budget_s=1e6))
    assert result.feasible and result.reason == ""
    assert decoder.points == N_CAL * (5**R + 1)
    assert result.total_s == result.measured_s > 0
    assert result.latent_s > 0 and result.output_grid_s > 0 and result.mean_owned_output_points is not None


def test_timed_schemes_compute_the_package_thresholds(tiny):
    crel, X, Y = tiny
    ours = time_crel_calibration(crel, X, Y, 0.1)
    assert ours["gamma"] > 0
    assert ours["gamma"] == CReL.from_models(crel.lgm, crel.dqr).calibrate(X, Y, 0.1).gamma_cal_
    assert ours["total_s"] >= ours["encode_s"] + ours["offsets_s"] + ours["distances_s"]
    grid = time_grid_calibration(crel, X, Y, 0.1, _grid_settings(budget_s=1e6))
    baseline = feldman_threshold(feldman_scores(crel.region_clouds(X, 5**R, gamma=0.0), Y), 0.1)
    assert grid.gamma > 0
    assert grid.gamma == pytest.approx(baseline, rel=1e-9)


def test_region_too_large_for_memory_is_timed_by_chunks(tiny):
    crel, X, Y = tiny
    result = time_grid_calibration(
        crel, X, Y, 0.1, _grid_settings(budget_s=1e6, max_region_points=8, probe_budget_s=0.2)
    )
    assert not result.feasible and result.reason == "memory"
    assert result.probe_points == 0 and result.chunk_timing["chunks_per_point"] == 4  # ceil(25 / 8)
    assert result.total_s > 0


def test_infeasibility_point_is_the_first_r_over_budget():
    def row(r, feasible):
        return {"latent_dim": r, "feasible": feasible}

    assert infeasibility_point([row(6, False), row(2, True), row(4, False), row(3, True)]) == 4
    assert infeasibility_point([row(2, True), row(3, True)]) is None


def test_output_grid_is_capped_and_owned_points_match_brute_force():
    rng = np.random.default_rng(1)
    grid = feldman_output_grid(rng.normal(size=(500, 20)), max_points=3000)
    assert grid.shape == (3000, 20) and np.unique(grid, axis=0).shape[0] == 3000  # 2^20 > 3000: a subset
    small = feldman_output_grid(rng.normal(size=(500, 2)), max_points=400)
    assert small.shape == (400, 2)
    centres, radii, y = rng.normal(size=(30, 2)), rng.uniform(0, 0.3, 30), np.array([0.1, -0.2])
    distance, owned = output_grid_step(small, centres, radii, y, rng)
    gaps = np.linalg.norm(small[:, None, :] - centres[None], axis=2) - radii
    inside = (gaps <= 0).any(axis=1)
    assert owned == inside.sum()
    assert distance == pytest.approx(np.linalg.norm(small[~inside] - y, axis=1).min(), rel=1e-5)


def _fake_result(r, crel_s, grid_s, feasible):
    grid = GridTiming(
        total_s=grid_s,
        feasible=feasible,
        reason="" if feasible else "budget",
        measured_s=grid_s if feasible else 1.0,
        budget_s=300.0,
        n_cal=4000,
        latent_dim=r,
        points_per_axis=5,
        latent_points_per_region=5**r,
        output_grid_points=300_000,
        probe_points=20,
        setup_s=0.5,
        latent_s=1.0,
        output_grid_s=2.0,
        per_point_s=grid_s / 4000,
        gamma=0.3 if feasible else None,
    )
    crel = {
        "total_s": crel_s,
        "encode_s": 0.1,
        "offsets_s": 0.5,
        "distances_s": 0.2,
        "quantile_s": 0.0,
        "gamma": 0.4,
        "n_cal": 4000,
    }
    return {"latent_dim": r, "crel": crel, "grid": grid.to_dict()}


def test_table_and_figure_round_trip(tmp_path):
    results = [_fake_result(8, 1.5, 2e5, False), _fake_result(2, 1.0, 90.0, True), _fake_result(4, 1.2, 900.0, False)]
    table = runtime_table(results)
    table.write_csv(tmp_path / "runtime.csv")
    for suffix in ("png", "svg"):
        plot_calibration_runtime(table, tmp_path / f"fig8.{suffix}")
        assert (tmp_path / f"fig8.{suffix}").stat().st_size > 1000
    back = pl.read_csv(tmp_path / "runtime.csv")
    assert {"paper_crel_s", "paper_grid_s", "paper_speedup", "grid_extrapolated", "grid_infeasibility_point"} <= set(
        back.columns
    )
    assert back["latent_dim"].to_list() == [2, 4, 8]
    assert back["paper_crel_s"].to_list() == [PAPER_FIG8[2]["crel"], None, PAPER_FIG8[8]["crel"]]
    assert back["paper_grid_s"][2] == PAPER_FIG8[8]["grid"]
    assert back["grid_infeasibility_point"].to_list() == [False, True, False]
    assert back["speedup"][0] == pytest.approx(90.0)


@pytest.mark.slow
def test_tiny_config_dry_run_plans_the_fig8_target(tmp_path):
    """`snakemake -n` with the tiny config plans one timing job per configured r."""
    config = yaml.safe_load((REPO / ".test/config/config.yaml").read_text())
    (tmp_path / "config").mkdir()
    (tmp_path / "config/config.yaml").write_text(yaml.safe_dump(config))
    targets = ["fig8_calibration_runtime.png", "fig8_calibration_runtime.svg", "calibration_runtime.csv"]
    result = subprocess.run(
        [*SNAKEMAKE, "-d", str(tmp_path), "--cores", "1", "-n", *(f"reports/crel/scaling/{name}" for name in targets)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    counts = dict(line.split()[:2] for line in result.stdout.splitlines() if line.startswith("scaling_"))
    assert counts["scaling_calibration_time"] == str(len(config["crel"]["scaling"]["latent_dims"]))
    assert counts["scaling_fig8"] == "1"

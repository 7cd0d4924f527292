"""Baselines of Table 1: Feldman et al. and PCP keep the conformal guarantee over resampled splits
(through the functions the workflow calls); DQR alone picks its level as the paper does; Table 1
is assembled with the paper's numbers beside ours."""

import numpy as np
import pytest
import torch

from condeval.core.conformal import coverage_bounds
from condeval.crel import paper
from condeval.crel.baselines.dqr import select_quantile_level
from condeval.crel.baselines.feldman import feldman_scores, feldman_threshold
from condeval.crel.baselines.pcp import pcp_scores, pcp_threshold
from condeval.crel.regions import iter_region_clouds
from condeval.crel.reports.synthetic import table1, table1_markdown

R = 2


def _split_coverage(scores, n_cal, alpha, threshold, draws, seed):
    """Mean and standard error of test coverage over random calibration/test splits of ``scores``."""
    rng = np.random.default_rng(seed)
    coverage = np.empty(draws)
    for i in range(draws):
        order = rng.permutation(scores.size)
        cal, test = scores[order[:n_cal]], scores[order[n_cal : n_cal + 200]]
        coverage[i] = np.mean(test <= threshold(cal, alpha))
    return coverage.mean(), coverage.std(ddof=1) / np.sqrt(draws)


def _in_band(mean, se, n_cal, alpha):
    low, high = coverage_bounds(n_cal, alpha)
    return low - 4 * se <= mean <= high + 4 * se


def _exchangeable_draws(rng, n=3000):
    """(x, y) pairs from one law: y = (x, x²) + Gaussian noise."""
    X = rng.uniform(-1, 1, size=(n, 1))
    return X, np.hstack([X, X**2]) + 0.4 * rng.standard_normal((n, R))


@pytest.fixture(scope="module")
def feldman_pool():
    """Feldman scores of 3,000 exchangeable points: distance of y to a fixed, misplaced decoded region."""
    X, Y = _exchangeable_draws(np.random.default_rng(0))
    U = np.vstack([np.eye(R), -np.eye(R)])
    centre = np.hstack([0.8 * X, 0.2 + 0 * X])  # a wrong model of the conditional centre
    b = centre @ U.T - 0.3  # boxes of half-width 0.3 around it
    decode = lambda z, x: z * 1.2 + 0.1  # noqa: E731  (a fixed, slightly wrong decoder)
    clouds = iter_region_clouds(U, b, 0.0, decode, X, n_latent=64)
    return feldman_scores(clouds, Y)


@pytest.fixture(scope="module")
def pcp_pool():
    """PCP scores: min squared distance of y to K = 30 samples of a fixed, over-narrow generator."""
    rng = np.random.default_rng(1)
    X, Y = _exchangeable_draws(rng)
    samples = np.hstack([X, X**2])[:, None, :] + 0.1 * rng.standard_normal((len(X), 30, R))
    return pcp_scores(samples, Y)


@pytest.mark.slow
@pytest.mark.parametrize("pool, threshold", [("feldman_pool", feldman_threshold), ("pcp_pool", pcp_threshold)])
@pytest.mark.parametrize("n_cal, alpha", [(19, 0.1), (99, 0.05), (200, 0.2)])
def test_baseline_keeps_the_conformal_band_over_resampled_splits(request, pool, threshold, n_cal, alpha):
    scores = request.getfixturevalue(pool)
    mean, se = _split_coverage(scores, n_cal, alpha, threshold, draws=1500, seed=n_cal)
    assert _in_band(mean, se, n_cal, alpha), (pool, mean, se, coverage_bounds(n_cal, alpha))


@pytest.mark.slow
def test_the_band_rejects_an_uncorrected_quantile(pcp_pool):
    """The harness can fail: PCP's public code thresholds without the (n+1) correction."""
    uncorrected = lambda s, a: np.quantile(s, 1 - a)  # noqa: E731
    mean, se = _split_coverage(pcp_pool, 19, 0.1, uncorrected, draws=1500, seed=19)
    assert not _in_band(mean, se, 19, 0.1)


def test_dqr_alone_takes_the_largest_level_meeting_the_target():
    coverage = {0.1: 0.88, 0.01: 0.93, 0.001: 0.99}
    assert select_quantile_level(coverage, 0.1) == (0.01, True)
    assert select_quantile_level(coverage, 0.12) == (0.1, True)
    assert select_quantile_level(coverage, 0.005) == (0.001, False)  # none meets 0.995: the smallest
    with pytest.raises(ValueError, match="no DQR baseline level"):
        select_quantile_level({}, 0.1)


def _summary(method, alpha, **extra):
    base = {
        "method": method,
        "alpha": alpha,
        "coverage_y": 0.9,
        "coverage_y_grid": 0.89,
        "area": 700.0,
        "n_test_y": 2000,
    }
    return base | extra


def test_table1_orders_rows_and_puts_the_papers_numbers_beside_ours():
    summaries = [
        _summary("pcp", 0.1, threshold=0.5),
        _summary("crel", 0.1, coverage_z=0.8905, gamma_cal=0.01, gamma_init=0.5),
        _summary("dqr", 0.02, coverage_z=0.98, quantile_level=0.001, target_met=False),
        _summary("feldman", 0.1, radius=0.2),
        _summary("crel", 0.05, coverage_z=0.95, gamma_cal=0.02, gamma_init=0.5),
    ]
    table = table1(summaries)
    assert list(zip(table["alpha"], table["method"])) == [
        (0.02, "dqr"),
        (0.05, "crel"),
        (0.1, "crel"),
        (0.1, "feldman"),
        (0.1, "pcp"),
    ]
    reported = paper.table1()
    crel = table.row(2, named=True)
    assert (crel["paper_coverage_z"], crel["paper_coverage_y"], crel["paper_area"]) == reported[("crel", 0.1)]
    assert table.row(1, named=True)["paper_area"] is None  # the paper has no alpha = 0.05 column
    assert "(target not met)" in table.row(0, named=True)["detail"]
    markdown = table1_markdown(table)
    assert "0.8905 (0.8953)" in markdown and markdown.count("\n") == 2 + len(summaries)


def test_dqr_checkpoint_is_picked_by_its_saved_level_not_by_list_order(tmp_path):
    from condeval.crel.baselines.dqr import checkpoint_at_level

    paths = []
    for tau in (0.01, 0.05):
        paths.append(tmp_path / f"tau{tau}.ckpt")
        torch.save({"hyper_parameters": {"quantile_level": tau}}, paths[-1])
    assert checkpoint_at_level(paths, 0.05) == paths[1]
    assert checkpoint_at_level(paths[::-1], 0.05) == paths[1]
    with pytest.raises(ValueError, match="no DQR checkpoint at quantile level 0.1"):
        checkpoint_at_level(paths, 0.1)


def test_fig2_panels_outline_feldman_and_the_dqr_on_the_output_grid():
    from condeval.crel.grid import OutputGrid
    from condeval.crel.regions import RegionCloud
    from condeval.crel.reports.synthetic import region_panels

    grid = OutputGrid(lower=np.array([-1.0, -1.0]), upper=np.array([1.0, 1.0]), points_per_axis=21)
    point = RegionCloud(0, latent=np.zeros((1, 2)), decoded=np.zeros((1, 2)), radii=np.zeros(1))
    wider = RegionCloud(0, latent=np.ones((1, 2)), decoded=np.zeros((1, 2)), radii=np.array([0.5]))
    (panel,) = region_panels(
        [point], [wider], [point], Z=np.full((1, 2), 3.0), Y=np.full((1, 2), 4.0), grid=grid, feldman_radius=0.3
    )
    assert np.array_equal(panel["z_after"], wider.latent) and np.array_equal(panel["y_test"], [4.0, 4.0])
    (gx, gy), feldman = panel["feldman"]
    inside = np.hypot(*np.meshgrid(gx, gy, indexing="ij")) <= 0.3 + 1e-9
    assert np.array_equal(feldman, inside)  # the decoded point grown by Feldman's radius
    assert panel["dqr"][1].sum() >= 1  # a one-point region still shows (half a grid diagonal)
    with pytest.raises(ValueError):
        region_panels([point], [], [point], Z=np.zeros((1, 2)), Y=np.zeros((1, 2)), grid=grid, feldman_radius=0.3)


def test_table1_gives_each_estimate_its_interval_over_test_points():
    import polars as pl

    from condeval.crel.evaluation import summarize

    rng = np.random.default_rng(0)
    per_point = pl.DataFrame(
        {"covered_y": rng.random(500) < 0.9, "covered_y_grid": np.ones(500, bool), "area": rng.integers(300, 500, 500)}
    )
    covered_z = rng.random(2000) < 0.9
    summary = summarize("crel", 0.1, per_point, covered_z=covered_z, gamma_cal=0.01, gamma_init=0.5)
    for key in ("coverage_z", "coverage_y", "area"):
        assert summary[f"{key}_low"] < summary[key] < summary[f"{key}_high"], key
    # test points are the unit: four times the points, half the width
    four = summarize("crel", 0.1, per_point, covered_z=np.tile(covered_z, 4))
    width = summary["coverage_z_high"] - summary["coverage_z_low"]
    assert four["coverage_z_high"] - four["coverage_z_low"] == pytest.approx(width / 2, rel=0.15)
    markdown = table1_markdown(table1([summary]))
    low, high = summary["coverage_z_low"], summary["coverage_z_high"]
    assert f"{summary['coverage_z']:.4f} [{low:.4f}–{high:.4f}] (0.8953)" in markdown
    # a method not calibrated in Z has no Z coverage and no interval for it
    pcp = summarize("pcp", 0.1, per_point)
    assert pcp["coverage_z"] is None and "coverage_z_low" not in pcp

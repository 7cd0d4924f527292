"""Latent regions: exact membership, bounding boxes, and the rasterized decoded set."""

import numpy as np
import pytest

from condeval.crel.baselines.feldman import feldman_scores
from condeval.crel.evaluation import cloud_set_metrics
from condeval.crel.grid import OutputGrid
from condeval.crel.polytope import EmptyRegionError, polytope_distance
from condeval.crel.regions import iter_region_clouds, latent_bounding_box, region_members


def _square_region(n_random=200, half=0.5, seed=0):
    """Directions (±e_j first) and offsets of the square [-half, half]^2 (extra directions are tangent)."""
    rng = np.random.default_rng(seed)
    random = rng.normal(size=(n_random, 2))
    random /= np.linalg.norm(random, axis=1, keepdims=True)
    U = np.vstack([np.eye(2), -np.eye(2), random])
    b = -half * np.abs(U).sum(axis=1)  # u·z >= -h_square(u)
    return U, b[None, :]


def _identity(z, x):
    return z


def test_bounding_box_is_exact_for_the_square():
    U, b = _square_region()
    lower, upper = latent_bounding_box(U, b, gamma=0.1)
    np.testing.assert_allclose(lower, [[-0.6, -0.6]])
    np.testing.assert_allclose(upper, [[0.6, 0.6]])


def test_empty_region_names_its_row():
    U, b = _square_region()
    b = np.repeat(b, 5, axis=0)
    b[3, 0] = 1.0  # z_1 >= 1 and z_1 <= 0.5
    with pytest.raises(EmptyRegionError, match="row 3"):
        latent_bounding_box(U, b)


def test_region_members_agree_with_exact_distance():
    U, b = _square_region()
    points = np.random.default_rng(1).uniform(-1, 1, size=(3000, 2))
    gamma = 0.2
    exact = polytope_distance(U, np.repeat(b, len(points), axis=0), points) <= gamma
    np.testing.assert_array_equal(region_members(U, b[0], points, gamma), exact)


@pytest.mark.parametrize("n_latent", [4096, 256])
def test_rasterized_area_of_decoded_region(n_latent):
    """Identity decoder: C_Y = S^γ = rounded square of area 1 + 4γ + πγ²."""
    U, b = _square_region()
    gamma = 0.2
    grid = OutputGrid(lower=np.array([-1.0, -1.0]), upper=np.array([1.0, 1.0]), points_per_axis=201)
    cloud = next(iter_region_clouds(U, b, gamma, _identity, None, n_latent))
    members = grid.within(cloud.decoded, np.maximum(cloud.radii, grid.half_diagonal))
    true_area = (1 + 4 * gamma + np.pi * gamma**2) / grid.cell_volume
    latent_spacing = (1 + 2 * gamma) / (int(np.sqrt(n_latent)) - 1)
    margin = np.sqrt(2) * latent_spacing  # discretization error is at most a latent cell near the boundary
    distance = polytope_distance(U, np.repeat(b, grid.size, 0), grid.points())
    inside = grid.points()[distance <= gamma - margin]
    assert np.isin(grid.nearest_index(inside), members).all()  # no holes, however coarse the latent grid
    assert members.size >= 0.99 * true_area
    tolerance = 0.04 if n_latent >= 4096 else 0.25  # coarse latent cells overshoot the boundary
    assert members.size <= (1 + tolerance) * true_area


def test_feldman_score_is_distance_to_decoded_region():
    U, b = _square_region()
    cloud = next(iter_region_clouds(U, b, 0.0, _identity, None, 4096))
    Y = np.array([[0.0, 0.0], [1.5, 0.0], [0.5, 0.9]])
    scores = feldman_scores([cloud], Y[:1])
    assert scores[0] == 0.0
    for y, expected in zip(Y[1:], (1.0, 0.4)):
        cloud.index = 0
        assert feldman_scores([cloud], y[None, :])[0] == pytest.approx(expected, abs=0.02)


def test_cloud_metrics_coverage_and_area():
    U, b = _square_region()
    grid = OutputGrid(lower=np.array([-1.0, -1.0]), upper=np.array([1.0, 1.0]), points_per_axis=101)
    clouds = list(iter_region_clouds(U, np.repeat(b, 2, 0), 0.0, _identity, None, 1024))
    table = cloud_set_metrics(grid, clouds, np.array([[0.1, 0.1], [0.9, 0.9]]))
    assert table["covered_y"].to_list() == [True, False]
    assert table["area"][0] == pytest.approx(1.0 / grid.cell_volume, rel=0.1)
    wide = cloud_set_metrics(grid, clouds, np.array([[0.1, 0.1], [0.9, 0.9]]), enlarge=0.6)
    assert wide["covered_y"].to_list() == [True, True]

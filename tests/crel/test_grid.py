"""The shared Y-grid: indexing, cells hit, balls, round-trip."""

import numpy as np
import pytest

from condeval.crel.grid import OutputGrid, box_grid


@pytest.fixture
def grid():
    return OutputGrid(lower=np.array([-1.0, 0.0]), upper=np.array([1.0, 2.0]), points_per_axis=21)


def test_from_samples_uses_quantiles_and_pad():
    Y = np.random.default_rng(0).normal(size=(20_000, 2))
    grid = OutputGrid.from_samples(Y, n_points=20_000, pad=0.2)
    lo, hi = np.quantile(Y, [0.01, 0.99], axis=0)
    np.testing.assert_allclose(grid.lower, lo - 0.2)
    np.testing.assert_allclose(grid.upper, hi + 0.2)
    assert grid.points_per_axis == 141 and grid.size == 141**2


def test_nearest_index_round_trips_grid_points(grid):
    flat = np.array([0, 5, 440, grid.size - 1])
    np.testing.assert_array_equal(grid.nearest_index(grid.points(flat)), flat)
    assert grid.nearest_index(np.array([[5.0, 5.0]]))[0] == -1


def test_within_matches_brute_force(grid):
    centres = np.random.default_rng(1).uniform([-1, 0], [1, 2], size=(7, 2))
    radius = 0.23
    brute = np.flatnonzero(np.min(np.linalg.norm(grid.points()[:, None] - centres[None], axis=2), axis=1) <= radius)
    np.testing.assert_array_equal(grid.within(centres, radius), brute)


def test_covers_uses_the_nearest_grid_point(grid):
    members = grid.nearest_index(np.array([[0.0, 1.0], [0.5, 0.5]]))
    assert members.size == 2
    assert grid.covers(members, np.array([[0.02, 0.98], [0.9, 1.9], [9.0, 9.0]])).tolist() == [True, False, False]


def test_area_of_disc_is_its_area_over_cell_volume():
    grid = OutputGrid(lower=np.array([-2.0, -2.0]), upper=np.array([2.0, 2.0]), points_per_axis=401)
    members = grid.within(np.zeros((1, 2)), 1.0)
    assert members.size * grid.cell_volume == pytest.approx(np.pi, rel=0.01)


def test_dict_round_trip(grid):
    again = OutputGrid.from_dict(grid.to_dict())
    np.testing.assert_array_equal(again.points(), grid.points())


def test_box_grid_counts():
    pts = box_grid(np.zeros(2), np.ones(2), 1024)
    assert pts.shape == (1024, 2)
    assert box_grid(np.zeros(12), np.ones(12), 1024).shape == (2**12, 12)

"""The miniature cell world: written as RxRx1 and read back by its loader, the same bytes per seed, and
separable effects: a held-out (cell type, siRNA) pair's channel intensities are predicted by an additive
model fitted on the other pairs, far better than by the pooled mean."""

import hashlib

import numpy as np
import polars as pl
import pytest

from condeval.datasets.cellworld import NEGATIVE_CONTROL, render_site, site_parameters, write_cell_world
from condeval.datasets.rxrx1 import CELL_TYPES, CHANNELS, load_site, read_metadata


def _digest(root):
    return hashlib.sha256(b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())).hexdigest()


def test_the_world_reads_back_as_rxrx1_and_is_deterministic(tmp_path):
    sirnas = [3, 1110, NEGATIVE_CONTROL]
    written = write_cell_world(tmp_path / "a", sirnas, sites_per_pair=2, seed=1, side=32)
    write_cell_world(tmp_path / "b", sirnas, sites_per_pair=2, seed=1, side=32)
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
    metadata = read_metadata(tmp_path / "a")
    assert metadata.height == written.height == 4 * 3 * 2
    assert metadata["site_id"].n_unique() == metadata.height
    assert set(metadata["well_type"]) == {"treatment", "positive_control", "negative_control"}
    site = load_site(tmp_path / "a", metadata.row(0, named=True))
    assert site.shape == (CHANNELS, 32, 32) and site.dtype == np.uint8 and site.max() > 100


@pytest.mark.slow
def test_effects_are_separable_so_unseen_pairs_are_compositions():
    rng = np.random.default_rng(0)
    sirnas = [2, 5, 8, 1111, 1120, NEGATIVE_CONTROL]
    rows = []
    for cell in CELL_TYPES:
        for sirna in sirnas:
            spec = site_parameters(cell, sirna)
            means = np.mean([render_site(spec, rng, 48).reshape(CHANNELS, -1).mean(1) for _ in range(6)], axis=0)
            rows.append({"cell": cell, "sirna": sirna, **{f"w{c}": float(np.log(means[c])) for c in range(CHANNELS)}})
    table = pl.DataFrame(rows)
    held = (table["cell"] == "RPE") & (table["sirna"] == 1111)
    train = table.filter(~held)
    for c in range(CHANNELS):
        column = f"w{c}"
        cell_effect = train.group_by("cell").agg(pl.col(column).mean())
        sirna_effect = train.group_by("sirna").agg(pl.col(column).mean())
        grand = train[column].mean()
        predicted = (
            cell_effect.filter(pl.col("cell") == "RPE")[column].item()
            + sirna_effect.filter(pl.col("sirna") == 1111)[column].item()
            - grand
        )
        actual = table.filter(held)[column].item()
        assert abs(predicted - actual) < 0.5 * abs(grand - actual) + 0.15, (column, predicted, actual, grand)

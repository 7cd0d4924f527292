"""The trust track's real table: both releases read through their loaders, the held-out regime's
training support excludes exactly the held-out conditions, and pixels come back at the working side."""

import numpy as np
import pytest

from condeval.datasets.cellworld import write_cell_world
from condeval.datasets.faceworld import write_face_world
from condeval.trust.data import (
    attributes_of,
    held_out_keys,
    queried_conditions,
    read_images,
    real_table,
    release_validation,
    training_support,
)


@pytest.fixture(scope="module")
def faces(tmp_path_factory):
    root = tmp_path_factory.mktemp("celeba")
    write_face_world(root, 120, seed=0, side=24)
    return root


@pytest.fixture(scope="module")
def cells(tmp_path_factory):
    root = tmp_path_factory.mktemp("rxrx1")
    write_cell_world(root, [1, 2, 3, 1108, 1138], 8, seed=0, side=16)
    return root


def test_celeba_rows_support_and_conditions(faces):
    table = real_table("celeba", faces)
    attributes = attributes_of("celeba", table)
    assert table.columns[:2] == ["key", "split"] and attributes.shape == (120, 4)
    held = training_support("celeba", table, "held_out")
    assert (attributes[held].sum(axis=1) <= 1).all() and (table["split"].to_numpy()[held] == "train").all()
    trained_multi = (attributes.sum(axis=1) >= 2) & (table["split"].to_numpy() == "train")
    assert not (held & trained_multi).any() and trained_multi.any()
    assert training_support("celeba", table, "full").sum() == (table["split"] == "train").sum()
    conditions = queried_conditions("celeba", table)
    assert conditions.height == 16 and conditions["seen"].sum() == 5
    assert len(held_out_keys("celeba", table, 100)) == 11
    images = read_images("celeba", faces, table.head(3).iter_rows(named=True), 16)
    assert images.shape == (3, 3, 16, 16) and images.dtype == np.uint8


def test_rxrx1_rows_support_and_conditions(cells):
    table = real_table("rxrx1", cells)
    attributes = attributes_of("rxrx1", table)
    held = {tuple(r) for r in held_out_keys("rxrx1", table, 4).tolist()}
    assert len(held) == 4
    support = training_support("rxrx1", table, "held_out", held_out_pairs=4)
    assert not any(tuple(r) in held for r in attributes[support].tolist())
    assert support.sum() == sum(tuple(r) not in held for r in attributes[table["split"].to_numpy() == "train"].tolist())
    conditions = queried_conditions("rxrx1", table, held_out_pairs=4, n_each=2, min_count=4)
    unseen = {tuple(r) for r in conditions.filter(~conditions["seen"]).drop("seen").rows()}
    assert len(unseen) == 2 and unseen <= held
    images = read_images("rxrx1", cells, table.head(2).iter_rows(named=True), 8)
    assert images.shape == (2, 6, 8, 8)


def test_the_official_validation_rows_come_from_outside_training_and_include_held_out_conditions(faces, cells):
    """`generator_training.validation: release`: CelebA's val split (RxRx1's metadata has none: its test
    split), every condition, the held-out ones included; the same rows for the same seed."""
    table = real_table("celeba", faces)
    rows = release_validation(table, 10, seed=0)
    assert rows.height == 10 and set(rows["split"].to_list()) == {"val"}
    assert rows.equals(release_validation(table, 10, seed=0)) and not rows.equals(release_validation(table, 10, 1))
    everything = release_validation(table, int((table["split"] == "val").sum()), seed=0)
    assert (attributes_of("celeba", everything).sum(axis=1) >= 2).any()  # held-out targets choose the checkpoint
    sites = real_table("rxrx1", cells)
    assert set(release_validation(sites, 4, seed=0)["split"].to_list()) == {"test"}
    with pytest.raises(ValueError, match="'val' split has"):
        release_validation(table, 10_000, seed=0)


def test_unknown_dataset_and_regime_are_refused(faces):
    with pytest.raises(ValueError, match="dataset must be one of"):
        real_table("imagenet", faces)
    with pytest.raises(ValueError, match="regime must be one of"):
        training_support("celeba", real_table("celeba", faces), "partial")

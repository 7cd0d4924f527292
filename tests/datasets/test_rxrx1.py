"""RxRx1's metadata.csv and per-channel PNGs in their real layout: a round trip, and every malformed
case named by file and line or by site and file."""

import numpy as np
import polars as pl
import pytest

from condeval.datasets import DatasetFormatError
from condeval.datasets.rxrx1 import CHANNELS, METADATA_COLUMNS, load_site, read_metadata, site_paths, write_site

HEADER = ",".join(METADATA_COLUMNS)
ROWS = [
    "HEPG2-01_1_B02_1,HEPG2-01_1_B02,HEPG2,train,HEPG2-01,1,B02,1,treatment,siRNA-1,3",
    "HUVEC-02_3_C04_2,HUVEC-02_3_C04,HUVEC,train,HUVEC-02,3,C04,2,negative_control,EMPTY,1138",
    "U2OS-01_4_N21_1,U2OS-01_4_N21,U2OS,test,U2OS-01,4,N21,1,positive_control,siRNA-1109,1109",
]


def _write(root, rows=ROWS):
    (root / "metadata.csv").write_text("\n".join([HEADER, *rows]) + "\n")


def test_metadata_and_sites_round_trip(tmp_path):
    _write(tmp_path)
    frame = read_metadata(tmp_path)
    assert frame["cell_type_id"].to_list() == [0, 1, 3] and frame["sirna_id"].to_list() == [3, 1138, 1109]
    row = frame.row(1, named=True)
    assert [p.relative_to(tmp_path).as_posix() for p in site_paths(tmp_path, row)][
        0
    ] == "images/HUVEC-02/Plate3/C04_s2_w1.png"
    site = np.random.default_rng(0).integers(0, 256, (CHANNELS, 24, 20), dtype=np.uint8)
    write_site(tmp_path, row, site)
    np.testing.assert_array_equal(load_site(tmp_path, row), site)


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([ROWS[0].replace(",1,B02,", ",x,B02,")], "line 2: 'plate' must be a non-negative integer, found 'x'"),
        ([ROWS[0], ROWS[1].replace(",1138", ",")], "line 3: 'sirna_id' must be a non-negative integer"),
        ([ROWS[0], ROWS[1].replace(",1138", ",-5")], "line 3: 'sirna_id' must be a non-negative integer, found '-5'"),
        (
            [ROWS[0].replace(",HEPG2-01_1_B02,", ",,")],
            r"line 2 \(site HEPG2-01_1_B02_1\): 'well_id' must be a non-empty",
        ),
        (
            [ROWS[0], ROWS[1].replace("HUVEC,", "HELA,", 1)],
            r"line 3 \(site HUVEC-02_3_C04_2\): unknown cell type 'HELA'",
        ),
        ([ROWS[0].replace(",HEPG2-01,1,", ",../../etc,1,")], "'experiment' '../../etc' leaves the data root"),
        ([ROWS[0], ROWS[0]], "site 'HEPG2-01_1_B02_1' listed twice"),
    ],
)
def test_malformed_metadata_names_the_line(tmp_path, rows, message):
    _write(tmp_path, rows)
    with pytest.raises(DatasetFormatError, match=message):
        read_metadata(tmp_path)


def test_a_missing_column_and_a_missing_file_are_named(tmp_path):
    (tmp_path / "metadata.csv").write_text(HEADER.replace(",sirna_id", "") + "\n")
    with pytest.raises(DatasetFormatError, match="no column 'sirna_id'"):
        read_metadata(tmp_path)
    with pytest.raises(DatasetFormatError, match="file not found"):
        read_metadata(tmp_path / "elsewhere")


def test_a_header_only_metadata_file_is_refused_not_an_empty_dataset(tmp_path):
    _write(tmp_path, rows=[])
    with pytest.raises(DatasetFormatError, match=r"metadata.csv: no sites in it"):
        read_metadata(tmp_path)


def test_a_site_names_its_missing_or_wrong_channel(tmp_path):
    from PIL import Image

    _write(tmp_path)
    row = read_metadata(tmp_path).row(0, named=True)
    paths = write_site(tmp_path, row, np.zeros((CHANNELS, 8, 8), np.uint8))
    paths[3].unlink()
    with pytest.raises(DatasetFormatError, match=r"site HEPG2-01_1_B02_1: channel file .*B02_s1_w4.png is missing"):
        load_site(tmp_path, row)
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(paths[3])
    with pytest.raises(DatasetFormatError, match="B02_s1_w4.png is mode RGB, not 8-bit grey"):
        load_site(tmp_path, row)
    Image.fromarray(np.zeros((9, 8), np.uint8)).save(paths[3])
    with pytest.raises(DatasetFormatError, match="channels differ in size"):
        load_site(tmp_path, row)
    with pytest.raises(ValueError, match="uint8"):
        write_site(tmp_path, row, np.zeros((CHANNELS, 8, 8), np.float32))
    assert isinstance(read_metadata(tmp_path), pl.DataFrame)


def _synthetic_metadata(seed: int = 0) -> pl.DataFrame:
    """Sites of 4 cell types x 30 siRNAs, with pair sizes that fall with the siRNA id (controls most frequent)."""
    rng = np.random.default_rng(seed)
    rows = []
    for cell in range(4):
        for sirna in [*range(1, 21), *range(1108, 1118)]:
            n = int(60 - sirna % 50 + rng.integers(0, 3)) if sirna >= 1108 else int(rng.integers(10, 40))
            rows += [
                {"cell_type_id": cell, "sirna_id": sirna, "dataset": "train" if k % 4 else "test"} for k in range(n)
            ]
    return pl.DataFrame(rows)


def test_held_out_pairs_and_the_subset_follow_the_ranking():
    from condeval.datasets.rxrx1 import condition_subset, held_out_pairs

    metadata = _synthetic_metadata()
    held = held_out_pairs(metadata, n_pairs=30)
    counts = metadata.filter(pl.col("dataset") == "train").group_by("cell_type_id", "sirna_id").len()
    top = sorted(counts.iter_rows(), key=lambda r: (-r[2], r[0], r[1]))[:30]
    assert [tuple(r) for r in held.iter_rows()] == top
    subset = condition_subset(metadata, held, n_each=10, min_count=22)
    assert subset.height == 20 and subset["seen"].sum() == 10
    held_keys = {(c, s) for c, s, _ in top}
    for c, s, n, seen, control in subset.iter_rows():
        assert ((c, s) in held_keys) != seen and n >= 22 and control == (s >= 1108)
    unseen = subset.filter(~pl.col("seen"))
    assert unseen["n"].to_list() == sorted(unseen["n"].to_list(), reverse=True)
    with pytest.raises(ValueError, match="only 0 unseen pairs have at least 500 sites"):
        condition_subset(metadata, held, n_each=10, min_count=500)

"""Malformed, truncated or NaN-laden inputs stop with a message naming the file and the field."""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from condeval.core.io import DataFileError, read_json, read_matrix, read_npz, read_parquet, write_parquet
from condeval.crel.folds import load_fold

REPO = Path(__file__).resolve().parents[2]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "-s", str(REPO / "workflow/Snakefile")]


def _frame(n=20, nan_at=None):
    x = np.arange(n, dtype=float)
    if nan_at is not None:
        x[nan_at] = np.nan
    return pl.DataFrame({"x0": x, "x1": x + 1, "y0": x * 2})


def test_nan_in_features_names_file_field_and_row(tmp_path):
    path = tmp_path / "raw.parquet"
    write_parquet(_frame(nan_at=7), path)
    with pytest.raises(ValueError, match=r"x\*.*raw\.parquet.*\(7, 0\)"):
        read_matrix(path, "x")


def test_truncated_parquet_names_the_file(tmp_path):
    path = tmp_path / "table.parquet"
    write_parquet(_frame(), path)
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(DataFileError, match="table.parquet.*not a readable Parquet"):
        read_parquet(path)


def test_missing_file_and_missing_field(tmp_path):
    with pytest.raises(DataFileError, match="absent.parquet: file not found"):
        read_parquet(tmp_path / "absent.parquet")
    path = tmp_path / "t.parquet"
    write_parquet(_frame(), path)
    with pytest.raises(DataFileError, match="t.parquet: required field 'fold'"):
        read_parquet(path, columns=["fold"])
    with pytest.raises(DataFileError, match="required field 'z0'"):
        read_matrix(path, "z")
    with pytest.raises(DataFileError, match="t.parquet: required field 'row'"):
        load_fold(path, "cal")


def test_malformed_json_and_npz(tmp_path):
    (tmp_path / "grid.json").write_text("{not json")
    with pytest.raises(DataFileError, match="grid.json: malformed JSON"):
        read_json(tmp_path / "grid.json")
    (tmp_path / "ok.json").write_text('{"lower": [0]}')
    with pytest.raises(DataFileError, match="ok.json: required field 'upper'"):
        read_json(tmp_path / "ok.json", required=["lower", "upper"])
    (tmp_path / "p.npz").write_bytes(b"garbage")
    with pytest.raises(DataFileError, match="p.npz: not a readable"):
        read_npz(tmp_path / "p.npz")


def test_atomic_write_leaves_no_partial_file(tmp_path):
    path = tmp_path / "out.parquet"
    write_parquet(_frame(), path)
    before = path.read_bytes()

    class Boom(pl.DataFrame):
        def write_parquet(self, *args, **kwargs):
            Path(args[0]).write_bytes(b"partial")
            raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        write_parquet(Boom(_frame()), path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["out.parquet"]


@pytest.mark.slow
def test_workflow_stops_loudly_on_nan_in_raw_data(tmp_path):
    (tmp_path / "config").mkdir()
    shutil.copy(REPO / ".test/config/config.yaml", tmp_path / "config/config.yaml")
    cmd = [*SNAKEMAKE, "-d", str(tmp_path), "--cores", "1"]
    raw = "data/synthetic/nonlinear.parquet"
    assert subprocess.run(cmd + [raw], capture_output=True, timeout=300).returncode == 0
    frame = pl.read_parquet(tmp_path / raw)
    poisoned = frame.with_columns(pl.when(pl.int_range(pl.len()) == 11).then(None).otherwise(pl.col("x3")).alias("x3"))
    poisoned.with_columns(pl.col("x3").fill_null(float("nan"))).write_parquet(tmp_path / raw)
    result = subprocess.run(
        cmd + ["results/crel/nonlinear/processed.parquet"], capture_output=True, text=True, timeout=300
    )
    assert result.returncode != 0
    log = (tmp_path / "logs/crel/nonlinear/preprocess.log").read_text()
    assert "non-finite value in 'x*'" in log and "nonlinear.parquet" in log and "(11, 3)" in log
    assert not (tmp_path / "results/crel/nonlinear/processed.parquet").exists()


def test_atomic_write_gives_normal_permissions(tmp_path):
    import os
    import stat

    path = tmp_path / "shared.parquet"
    write_parquet(_frame(), path)
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask


def test_a_dropped_middle_column_is_named_not_renumbered(tmp_path):
    """Deleting x3 must not turn x0..x7 into a 7-wide matrix that trains silently."""
    path = tmp_path / "raw.parquet"
    frame = pl.DataFrame({f"x{j}": np.arange(5.0) for j in range(8)} | {"y0": np.ones(5), "y1": np.ones(5)})
    write_parquet(frame.drop("x3"), path)
    with pytest.raises(DataFileError, match=r"raw\.parquet: required field 'x3' is missing"):
        read_matrix(path, "x")
    with pytest.raises(DataFileError, match=r"raw\.parquet: required field 'x3' is missing.*x0\.\.x7"):
        read_matrix(path, "x", width=8)


def test_width_from_the_config_is_enforced(tmp_path):
    path = tmp_path / "raw.parquet"
    write_parquet(pl.DataFrame({f"x{j}": np.arange(5.0) for j in range(8)}), path)
    assert read_matrix(path, "x", width=8).shape == (5, 8)
    with pytest.raises(DataFileError, match=r"required field 'x8' is missing"):
        read_matrix(path, "x", width=9)
    with pytest.raises(DataFileError, match=r"unexpected field 'x7'"):
        read_matrix(path, "x", width=7)


def test_an_empty_parquet_names_the_file(tmp_path):
    path = tmp_path / "empty.parquet"
    write_parquet(pl.DataFrame({"x0": pl.Series([], dtype=pl.Float64)}), path)
    with pytest.raises(DataFileError, match=r"empty\.parquet: has no rows"):
        read_matrix(path, "x", width=1)


def test_a_processed_file_with_a_gap_is_refused_by_load_fold(tmp_path):
    path = tmp_path / "processed.parquet"
    frame = pl.DataFrame(
        {
            "row": [0, 1],
            "fold": ["cal", "cal"],
            "is_val": [False, False],
            "x0": [0.0, 1.0],
            "x2": [0.0, 1.0],
            "y0": [1.0, 2.0],
        }
    )
    write_parquet(frame, path)
    with pytest.raises(DataFileError, match=r"processed\.parquet: required field 'x1' is missing"):
        load_fold(path, "cal")


def _loads_a_checkpoint(function: ast.Attribute) -> bool:
    torch_load = function.attr == "load" and isinstance(function.value, ast.Name) and function.value.id == "torch"
    return torch_load or function.attr == "load_from_checkpoint"


def _checkpoint_loads_without_weights_only(path: Path) -> list[str]:
    """``file:line`` of each ``load_from_checkpoint``/``torch.load`` call lacking an explicit ``weights_only``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        is_load = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _loads_a_checkpoint(node.func)
        if is_load and not any(keyword.arg == "weights_only" for keyword in node.keywords):
            found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    return found


def test_every_checkpoint_load_says_weights_only():
    """A checkpoint from a shared remote must not unpickle code: every load states ``weights_only``."""
    files = [
        p
        for folder in ("src", "workflow", "tests", "benchmarks", "tools")
        for p in sorted((REPO / folder).rglob("*.py"))
    ]
    offenders = [hit for path in files for hit in _checkpoint_loads_without_weights_only(path)]
    assert offenders == []


def test_json_that_is_not_utf8_is_named(tmp_path):
    (tmp_path / "grid.json").write_bytes(b'{"label": "caf\xe9"}')  # Latin-1
    with pytest.raises(DataFileError, match=r"grid.json: not UTF-8 text \(byte 14\)"):
        read_json(tmp_path / "grid.json")


def test_a_manifest_that_is_not_utf8_is_named(tmp_path):
    from condeval.core.io import saved_folder

    (tmp_path / "model").mkdir()
    (tmp_path / "model.sha256").write_bytes(b"\xff\xfe not text")
    with pytest.raises(DataFileError, match=r"model.sha256: not UTF-8 text"):
        saved_folder(tmp_path / "model.sha256")


@pytest.mark.parametrize("side", [8, 16])
def test_channels_last_batches_are_named_at_any_size(side):
    """An 8-pixel (N, H, W, C) batch was read as 8 channels of 3-pixel-wide images."""
    from condeval.core.io import image_batch

    channels_last = np.zeros((2, side, side, 3), np.uint8)
    for channels in (None, 3):
        with pytest.raises(ValueError, match=r"look like \(N, H, W, C\)"):
            image_batch(channels_last, channels=channels)
    assert image_batch(channels_last.transpose(0, 3, 1, 2), channels=3).shape == (2, 3, side, side)
    assert image_batch(np.zeros((2, 6, side, side), np.uint8)).shape == (2, 6, side, side)  # RxRx1's six channels


def test_a_non_finite_value_in_a_checked_column_names_the_file_and_row(tmp_path):
    path = tmp_path / "latent_scores.parquet"
    pl.DataFrame({"fold": ["cal", "cal", "test"], "score": [0.1, float("nan"), 0.3]}).write_parquet(path)
    assert read_parquet(path, columns=["score"]).height == 3  # unchecked columns pass as they are
    with pytest.raises(DataFileError, match=r"latent_scores.parquet: row 1 holds a non-finite 'score'"):
        read_parquet(path, columns=["fold", "score"], finite=["score"])

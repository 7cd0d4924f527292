"""CellProfiler for real: the saved pipelines, a headless run on mini-RxRx1 sites, the composite and Image.csv.

The CellProfiler tests need `make cellprofiler` (`make test` builds it first). Without it they fail,
naming the reason: they never skip.
"""

import subprocess
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from condeval.core.io import DataFileError
from condeval.datasets.cellworld import CELLS_DRAWN, write_cell_world
from condeval.datasets.rxrx1 import load_site
from condeval.trust.cellprofiler import (
    RXRX1_COLOURS,
    composite,
    merge_image_csvs,
    read_image_csv,
    run_cellprofiler,
    segmentation_check,
    write_inputs,
)

REPO = Path(__file__).resolve().parents[2]
VENV = REPO / ".cellprofiler"
PIPELINES = REPO / "workflow/resources/trust"
MODULES = (
    "IdentifyPrimaryObjects",
    "IdentifySecondaryObjects",
    "IdentifyTertiaryObjects",
    "MeasureObjectSizeShape",
    "MeasureObjectIntensity",
    "MeasureTexture",
    "MeasureGranularity",
    "MeasureObjectIntensityDistribution",
    "MeasureObjectNeighbors",
    "MeasureImageAreaOccupied",
    "ExportToSpreadsheet",
)


def _cellprofiler_python() -> Path:
    python = VENV / "bin/python"
    if not (VENV / ".installed").is_file() or not python.is_file():
        pytest.fail(f"CellProfiler is not built in {VENV}: run `make cellprofiler` (tools/cellprofiler-env.sh)")
    return python


_LOAD = """
import sys
from cellprofiler_core.preferences import set_headless, set_awt_headless
set_headless(); set_awt_headless(True)
from cellprofiler_core.pipeline import Pipeline
pipeline = Pipeline()
pipeline.load(sys.argv[1])
for module in pipeline.modules():
    settings = {s.text: s.value_text for s in module.settings()}
    print(module.module_name, repr(settings))
"""


@pytest.mark.parametrize("kind", ["channels", "composite"])
def test_the_saved_pipeline_loads_in_cellprofiler_with_the_papers_modules(kind):
    python = _cellprofiler_python()
    done = subprocess.run(
        [python, "-c", _LOAD, PIPELINES / f"morphology_{kind}.cppipe"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    modules = {}
    for line in done.stdout.splitlines():
        name, _, settings = line.partition(" ")
        modules.setdefault(name, []).append(eval(settings))  # noqa: S307 (our own repr of setting texts)
    assert set(MODULES) <= set(modules), set(MODULES) - set(modules)
    texture = modules["MeasureTexture"][0]
    assert texture["Enter how many gray levels to measure the texture at"] == "256"
    text = (PIPELINES / f"morphology_{kind}.cppipe").read_text()
    assert [line.split(":")[1] for line in text.splitlines() if "Texture scale to measure" in line] == ["3", "5", "10"]
    assert modules["MeasureObjectSizeShape"][0]["Calculate the Zernike features?"] == "Yes"
    assert modules["MeasureObjectIntensityDistribution"][0]["Number of bins"] == "4"
    export = modules["ExportToSpreadsheet"][0]
    assert export["Add a prefix to file names?"] == "No"
    assert export["Export all measurement types?"] == "No" and export["Data to export"] == "Image"
    for aggregate in ("mean", "median", "standard deviation"):
        assert export[f"Calculate the per-image {aggregate} values for object measurements?"] == "Yes"


def test_the_saved_pipelines_are_what_the_builder_writes():
    python = _cellprofiler_python()
    done = subprocess.run(
        [python, REPO / "tools/build_cppipe.py", "--check"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["channels"])
def test_a_headless_run_on_four_mini_sites_writes_the_papers_columns_and_counts_the_nuclei(tmp_path, kind):
    _cellprofiler_python()
    metadata = write_cell_world(tmp_path / "world", [1, 1138], 1, seed=3, side=32)
    rows = list(metadata.head(4).iter_rows(named=True))
    write_inputs(((r["site_id"], load_site(tmp_path / "world", r)) for r in rows), tmp_path / "in", kind, 128)
    image_csv = run_cellprofiler(
        str(VENV / "bin/cellprofiler"), PIPELINES / f"morphology_{kind}.cppipe", tmp_path / "in", tmp_path / "out"
    )
    frame = read_image_csv(image_csv, "FileName_w1")
    assert sorted(frame["name"].to_list()) == sorted(r["site_id"] for r in rows)
    for column in (
        "Count_Nuclei",
        "Count_Cells",
        "Count_Cytoplasm",
        "Mean_Cells_Texture_Correlation_OrigGray_5_01_256",
        "Granularity_2_OrigGray",
        "Mean_Nuclei_AreaShape_Zernike_9_7",
        "AreaOccupied_AreaOccupied_Cells",
        "Mean_Cells_RadialDistribution_FracAtD_OrigGray_4of4",
        "Mean_Cells_Neighbors_NumberOfNeighbors_Adjacent",
        "StDev_Cytoplasm_AreaShape_FormFactor",
        "Median_Nuclei_Intensity_MeanIntensity_OrigGray",
    ):
        assert column in frame.columns, column
    check = segmentation_check(frame, pl.read_csv(tmp_path / "world" / CELLS_DRAWN))
    assert check["sites"] == 4
    assert check["mae"] <= 0.5, check  # the miniature's nuclei are segmentable


def test_the_composite_colours_each_channel_with_the_rxrx1_colour_map():
    rng = np.random.default_rng(0)
    for channel in range(6):
        site = np.zeros((6, 8, 8), np.uint8)
        site[channel] = rng.integers(0, 255, (8, 8), dtype=np.uint8)
        image = composite(site)
        brightest = np.unravel_index(site[channel].argmax(), (8, 8))
        np.testing.assert_allclose(image[brightest], RXRX1_COLOURS[channel], atol=1)
    assert composite(np.zeros((6, 8, 8), np.uint8), side=32).shape == (32, 32, 3)
    with pytest.raises(ValueError, match=r"\(6, H, W\)"):
        composite(np.zeros((3, 8, 8), np.uint8))


def _image_csv(path: Path, names: list[str]) -> Path:
    pl.DataFrame(
        {
            "ImageNumber": list(range(1, len(names) + 1)),
            "FileName_w1": [f"{n}_w1.png" for n in names],
            "Count_Nuclei": [3.0] * len(names),
            "Count_Cells": [3.0] * len(names),
        }
    ).write_csv(path)
    return path


def test_image_csvs_are_checked_and_merged_naming_the_file(tmp_path):
    a = _image_csv(tmp_path / "a.csv", ["HEPG2-01_1_B02_1", "HEPG2-01_1_B02_2"])
    b = _image_csv(tmp_path / "b.csv", ["HEPG2-01_1_B03_1"])
    merged = merge_image_csvs([a, b], "FileName_w1")
    assert merged["ImageNumber"].to_list() == [1, 2, 3]
    assert merged["name"].to_list() == ["HEPG2-01_1_B02_1", "HEPG2-01_1_B02_2", "HEPG2-01_1_B03_1"]
    pl.DataFrame(
        {
            "ImageNumber": [1, 2],
            "FileName_w1": ["a_w1.png", "b_w1.png"],
            "Count_Nuclei": ["3", "NaN"],
            "Count_Cells": ["2.5", "4"],
            "Metadata_Site": ["a", "b"],
        }
    ).write_csv(tmp_path / "text.csv")
    numbers = read_image_csv(tmp_path / "text.csv", "FileName_w1")
    assert numbers.schema["Count_Nuclei"] == pl.Float64 and numbers.schema["Metadata_Site"] == pl.String
    with pytest.raises(DataFileError, match="more than one shard"):
        merge_image_csvs([a, a], "FileName_w1")
    # the same sites measured in another run and folder: their seconds and folder differ, the table does not
    runs = []
    for k in range(2):
        pl.read_csv(a).with_columns(
            ExecutionTime_11MeasureTexture=pl.lit(1.3 + k),
            PathName_w1=pl.lit(f"/run{k}"),
            URL_w1=pl.lit(f"file:///run{k}/x"),
            Metadata_FileLocation=pl.lit(f"/run{k}"),
            ImageSet_ImageSet=pl.lit(f"b'eLtN{k}'"),
            Metadata_Site=pl.lit("1"),
        ).write_csv(tmp_path / f"run{k}.csv")
        runs.append(merge_image_csvs([tmp_path / f"run{k}.csv"], "FileName_w1"))
    assert runs[0].equals(runs[1]) and "Metadata_Site" in runs[0].columns and "PathName_w1" not in runs[0].columns
    pl.DataFrame({"ImageNumber": [1], "FileName_w1": ["x_w1.png"]}).write_csv(tmp_path / "bad.csv")
    with pytest.raises(DataFileError, match=r"bad\.csv.*Count_Nuclei"):
        read_image_csv(tmp_path / "bad.csv", "FileName_w1")

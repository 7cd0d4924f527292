"""docs/trust/index.md's "Your own generator, end to end" runs as written: folders of PNGs and CSVs of
attributes in, scores and accepted samples out, through a tiny DINOv3 saved where the hub checkpoint goes."""

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from PIL import Image

from condeval.encoders.patch_features import tiny_dinov3
from condeval.encoders.preprocess import PROCESSOR_FILE

DOC = Path(__file__).resolve().parents[2] / "docs" / "trust" / "index.md"
MARKER = "<!-- example: your-generator -->"
NAMES = ["male", "smiling", "blond", "glasses"]
#: The hub DINOv3's processor file (resize 224, bilinear, ImageNet mean and std), which image_size=256 overrides.
DINOV3_PROCESSOR = {
    "image_processor_type": "DINOv3ViTImageProcessorFast", "do_resize": True, "size": {"height": 224, "width": 224},
    "resample": 2, "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
    "image_mean": [0.485, 0.456, 0.406], "image_std": [0.229, 0.224, 0.225],
}  # fmt: skip


def example_block(text: str) -> str:
    """The ```python block right after the marker."""
    assert MARKER in text, f"{DOC}: no {MARKER!r}"
    return text.split(MARKER, 1)[1].split("```python", 1)[1].split("```", 1)[0]


def render(condition, rng: np.random.Generator, side: int = 48, broken: bool = False) -> Image.Image:
    """A face-like stand-in: each attribute tints one channel or draws a band, plus pixel noise; a broken
    sample is noise alone."""
    if broken:
        return Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8))
    pixels = np.full((side, side, 3), 90.0) + rng.normal(0, 12, (side, side, 3))
    male, smiling, blond, glasses = condition
    pixels[..., 0] += 70 * male
    pixels[..., 1] += 70 * smiling
    pixels[..., 2] += 70 * blond
    if glasses:
        pixels[side // 3 : side // 3 + 6] = 20
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def write_folder(root: Path, folder: str, conditions, per_condition: int, rng, broken: int = 0) -> None:
    """``folder``/*.png and ``folder``.csv (file and the attribute columns), ``broken`` noise images per condition."""
    (root / folder).mkdir()
    rows = []
    for c, condition in enumerate(conditions):
        for i in range(per_condition):
            name = f"{c:02d}_{i:03d}.png"
            render(condition, rng, broken=i < broken).save(root / folder / name)
            rows.append({"file": name} | dict(zip(NAMES, map(int, condition), strict=True)))
    pl.DataFrame(rows).write_csv(root / f"{folder}.csv")


@pytest.fixture
def lab_folder(tmp_path):
    """The example's layout: a tiny DINOv3 (patch 16, 4 registers, the hub's processor file) at the hub
    checkpoint's path; real images of the held-out support (the all-absent reference and the four single
    attributes); samples of those and of one unseen condition, 5 of each condition's 30 broken; real
    target images of every queried condition."""
    import torch

    torch.manual_seed(0)
    model = tmp_path / "models/facebook/dinov3-vitl16-pretrain-lvd1689m"
    tiny_dinov3(224, width=32, layers=1, heads=2, patch_size=16, registers=4).save_pretrained(model)
    (model / PROCESSOR_FILE).write_text(json.dumps(DINOV3_PROCESSOR))
    support = [(0, 0, 0, 0), (1, 0, 0, 0), (0, 1, 0, 0), (0, 0, 1, 0), (0, 0, 0, 1)]
    queried = [*support, (1, 1, 0, 0)]
    rng = np.random.default_rng(0)
    write_folder(tmp_path, "real", support, 40, rng)
    write_folder(tmp_path, "samples", queried, 30, rng, broken=5)
    write_folder(tmp_path, "target", queried, 20, rng)
    return tmp_path


def test_the_end_to_end_example_scores_accepts_and_selects_as_written(lab_folder, monkeypatch):
    monkeypatch.chdir(lab_folder)
    namespace = {"__name__": "docs_trust_example"}
    exec(example_block(DOC.read_text()), namespace)

    scores = pl.read_csv(lab_folder / "scores.csv")
    assert scores.height == 180 and {"file", *NAMES, "realism", "faithfulness", "trust", "accepted"} <= set(
        scores.columns
    )
    assert {f"margin_{name}" for name in NAMES} <= set(scores.columns)
    broken = scores["file"].str.extract(r"_(\d+)\.png$").cast(int) < 5
    kept = scores["accepted"].to_numpy()
    assert not kept[broken.to_numpy()].any(), "a noise image passed the P95-real rule"
    assert kept[~broken.to_numpy()].mean() > 0.5

    selected = namespace["selected"]
    assert np.array_equal(selected.accepted, namespace["keep"])  # one rule, one set of thresholds
    assert selected.summary["conditions"] >= 1 and "improvement_official" in selected.summary
    per_condition = pl.read_csv(lab_folder / "per_condition.csv")
    assert per_condition.height == 6
    unseen = per_condition.filter((pl.col("male") == 1) & (pl.col("smiling") == 1))
    assert unseen["fallback"].item() == 2  # the two seen conditions one attribute away

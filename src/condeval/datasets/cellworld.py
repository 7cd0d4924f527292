"""The miniature cell world: six-channel fluorescence-like sites of segmentable nuclei and cells, written
as RxRx1 (:mod:`condeval.datasets.rxrx1`).

A site shows cells of one cell type under one siRNA. Both act through **separable effects**: each
morphology and intensity parameter is a cell-type base times an siRNA factor (added on the log
scale), so an unseen (cell type, siRNA) pair is a true composition of effects seen elsewhere.

- Cell type sets the cell and nucleus radii, elongation, density and the channels' base intensities.
- An siRNA multiplies the nucleus size, cell size, elongation, density, each channel's intensity and
  the mitochondrial granularity by factors drawn from its id; the negative control
  (:data:`NEGATIVE_CONTROL`) has none, and the positive controls (``sirna_id`` 1108–1137) the strongest.

Channels, as Cell Painting's: w1 nuclei (Hoechst), w2 endoplasmic reticulum, w3 actin (cell edges),
w4 nucleoli and RNA, w5 mitochondria (granules), w6 Golgi (a blob beside the nucleus). Nuclei are
bright, well separated ellipses on a dark background and every cell body is outlined in w3, so a
nucleus-then-cell segmentation (CellProfiler's IdentifyPrimary/SecondaryObjects) finds them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from condeval.datasets.rxrx1 import CELL_TYPES, CHANNELS, CONTROL_SIRNA_ID, write_site

__all__ = [
    "CELLS_DRAWN",
    "CELL_TYPE_BASES",
    "NEGATIVE_CONTROL",
    "SiteSpec",
    "site_parameters",
    "render_site",
    "write_cell_world",
]

#: Cell-type bases: radii in pixels at a 64-pixel site, elongation, cells per site, channel intensities.
CELL_TYPE_BASES = {
    "HEPG2": {
        "cell": 7.0,
        "nucleus": 3.6,
        "elongation": 1.1,
        "density": 9.0,
        "channels": (0.9, 0.5, 0.4, 0.6, 0.5, 0.4),
    },
    "HUVEC": {
        "cell": 8.5,
        "nucleus": 3.4,
        "elongation": 1.6,
        "density": 6.0,
        "channels": (0.8, 0.4, 0.7, 0.5, 0.6, 0.3),
    },
    "RPE": {
        "cell": 9.0,
        "nucleus": 4.0,
        "elongation": 1.3,
        "density": 5.0,
        "channels": (0.85, 0.6, 0.5, 0.4, 0.4, 0.6),
    },
    "U2OS": {
        "cell": 7.5,
        "nucleus": 4.2,
        "elongation": 1.2,
        "density": 7.0,
        "channels": (0.95, 0.45, 0.55, 0.7, 0.7, 0.5),
    },
}
#: The miniature's ground truth beside metadata.csv: cells drawn per site.
CELLS_DRAWN = "cells_drawn.csv"
#: The negative control ("EMPTY"): no effect.
NEGATIVE_CONTROL = 1138
_EFFECTS = ("nucleus", "cell", "elongation", "density", "granularity")


@dataclass(frozen=True)
class SiteSpec:
    """The parameters one site is drawn from."""

    cell: float
    nucleus: float
    elongation: float
    density: float
    granularity: float
    channels: tuple[float, ...]


def _sirna_effects(sirna_id: int, world_seed: int) -> dict:
    """log-scale factors of an siRNA: none for the negative control, strongest for positive controls."""
    if sirna_id == NEGATIVE_CONTROL:
        return {name: 0.0 for name in _EFFECTS} | {"channels": np.zeros(CHANNELS)}
    strength = 0.45 if CONTROL_SIRNA_ID <= sirna_id < NEGATIVE_CONTROL else 0.25
    rng = np.random.default_rng([world_seed, 7919, sirna_id])
    bound = 1.2 * strength  # no siRNA shrinks nuclei below what a segmentation can find

    def draw(size=None):
        return np.clip(rng.normal(0, strength, size), -bound, bound)

    return {name: float(draw()) for name in _EFFECTS} | {"channels": draw(CHANNELS)}


def site_parameters(cell_type: str, sirna_id: int, world_seed: int = 0) -> SiteSpec:
    """The cell type's base times the siRNA's factors (separable on the log scale)."""
    base, effect = CELL_TYPE_BASES[cell_type], _sirna_effects(sirna_id, world_seed)
    return SiteSpec(
        cell=base["cell"] * np.exp(effect["cell"]),
        nucleus=base["nucleus"] * np.exp(effect["nucleus"]),
        elongation=1.0 + (base["elongation"] - 1.0) * np.exp(effect["elongation"]),
        density=base["density"] * np.exp(effect["density"]),
        granularity=float(np.exp(effect["granularity"])),
        channels=tuple(float(c * np.exp(e)) for c, e in zip(base["channels"], effect["channels"], strict=True)),
    )


def render_site(spec: SiteSpec, rng: np.random.Generator, side: int = 64) -> np.ndarray:
    """One site, (6, side, side) uint8: cells placed without overlap, each channel's stain drawn, blurred, noised."""
    return _render_site(spec, rng, side)[0]


def _render_site(spec: SiteSpec, rng: np.random.Generator, side: int) -> tuple[np.ndarray, int]:
    """The site and how many cells (each with one nucleus) it shows."""
    from scipy.ndimage import gaussian_filter

    scale = side / 64.0
    yy, xx = np.mgrid[0:side, 0:side].astype(np.float32)
    stains = np.zeros((CHANNELS, side, side), np.float32)
    centres: list[tuple[float, float, float]] = []
    for _ in range(max(1, rng.poisson(spec.density))):
        radius = spec.cell * scale * rng.uniform(0.85, 1.15)
        reach = radius * spec.elongation**0.5  # the half major axis
        for _attempt in range(30):  # a free spot: no two cells overlap, whatever their orientation
            cx, cy = rng.uniform(reach * 0.6, side - reach * 0.6, 2)
            if all(np.hypot(cx - x, cy - y) > reach + r for x, y, r in centres):
                break
        else:
            continue
        centres.append((cx, cy, reach))
        _draw_cell(stains, xx, yy, cx, cy, radius, spec, rng, scale)
    intensities = np.asarray(spec.channels, np.float32)[:, None, None]
    blurred = np.stack([gaussian_filter(s, 0.7 * scale) for s in stains]) * intensities
    noisy = blurred * 220.0 + 8.0 + rng.normal(0, 3.0, blurred.shape)
    return np.clip(noisy, 0, 255).astype(np.uint8), len(centres)


def _ellipse(xx, yy, cx, cy, rx, ry, angle):
    c, s = np.cos(angle), np.sin(angle)
    u, v = (xx - cx) * c + (yy - cy) * s, -(xx - cx) * s + (yy - cy) * c
    return (u / rx) ** 2 + (v / ry) ** 2


def _draw_cell(stains, xx, yy, cx, cy, radius, spec: SiteSpec, rng, scale) -> None:
    angle = rng.uniform(0, np.pi)
    body = _ellipse(xx, yy, cx, cy, radius * spec.elongation**0.5, radius / spec.elongation**0.5, angle)
    nucleus_r = min(spec.nucleus * scale * rng.uniform(0.9, 1.1), 0.7 * radius / spec.elongation**0.5)
    nucleus = _ellipse(xx, yy, cx, cy, nucleus_r * 1.15, nucleus_r / 1.15, angle)
    inside, in_nucleus = body <= 1.0, nucleus <= 1.0
    cytoplasm = inside & ~in_nucleus
    stains[0][in_nucleus] += 1.0 - 0.3 * nucleus[in_nucleus]  # w1: nuclei, brightest at the centre
    stains[1][cytoplasm] += 0.6 * np.exp(-body[cytoplasm])  # w2: ER, fading outwards
    stains[2][inside & (body > 0.7)] += 1.0  # w3: actin at the cell edge
    for _ in range(int(rng.integers(1, 4))):  # w4: nucleoli inside the nucleus
        ox, oy = rng.normal(0, 0.35 * nucleus_r, 2)
        stains[3][(xx - cx - ox) ** 2 + (yy - cy - oy) ** 2 <= (0.3 * nucleus_r) ** 2] += 1.0
    granules = int(6 * spec.granularity * (radius / (7.0 * scale)) ** 2) + 2  # w5: mitochondria
    for _ in range(granules):
        r, t = rng.uniform(nucleus_r * 1.2, radius * 0.9), rng.uniform(0, 2 * np.pi)
        gx, gy = cx + r * np.cos(t), cy + r * np.sin(t)
        stains[4][(xx - gx) ** 2 + (yy - gy) ** 2 <= (0.9 * scale) ** 2] += 1.0
    t = rng.uniform(0, 2 * np.pi)  # w6: Golgi beside the nucleus
    gx, gy = cx + 1.4 * nucleus_r * np.cos(t), cy + 1.4 * nucleus_r * np.sin(t)
    stains[5][((xx - gx) ** 2 + (yy - gy) ** 2 <= (0.8 * nucleus_r) ** 2) & cytoplasm] += 1.0


def _well(index: int) -> str:
    """RxRx1's 384-well names, B02..O23 (the outer ring unused)."""
    return f"{'BCDEFGHIJKLMNO'[index // 22 % 14]}{index % 22 + 2:02d}"


def write_cell_world(
    root: str | Path,
    sirna_ids: list[int],
    sites_per_pair: dict | int,
    seed: int,
    side: int = 64,
    test_share: float = 0.25,
) -> pl.DataFrame:
    """Write sites of every (cell type, siRNA) pair as RxRx1 under ``root`` and return the metadata.

    Beside the release's files, ``cells_drawn.csv`` (``site_id``, ``cells``) holds how many cells each
    site shows: the ground truth a segmentation's counts are checked against (not part of RxRx1).

    Parameters
    ----------
    root : path-like
    sirna_ids : list of int
        The siRNAs (controls from 1108; :data:`NEGATIVE_CONTROL` is the empty one).
    sites_per_pair : int or dict
        Sites per pair, or ``{(cell type, sirna_id): n}`` (pairs missing from it get none).
    seed : int
        The world's seed: siRNA effects and every site's draws. The same seed writes the same bytes.
    side : int
        Site side in pixels (the release's 512).
    test_share : float
        Share of each pair's sites in the release's ``test`` split (``dataset`` column).
    """
    root = Path(root)
    rng = np.random.default_rng(seed)
    rows, drawn = [], []
    for cell_type in CELL_TYPES:
        experiment = f"{cell_type}-01"
        for k, sirna_id in enumerate(sirna_ids):
            n = sites_per_pair if isinstance(sites_per_pair, int) else sites_per_pair.get((cell_type, sirna_id), 0)
            spec = site_parameters(cell_type, sirna_id, seed)
            for i in range(n):
                plate, site = 1 + i // 2 % 4, 1 + i % 2
                well = _well(k * 8 + i // 8)
                row = {
                    "site_id": f"{experiment}_{plate}_{well}_{site}",
                    "well_id": f"{experiment}_{plate}_{well}",
                    "cell_type": cell_type,
                    "dataset": "test" if rng.random() < test_share else "train",
                    "experiment": experiment,
                    "plate": plate,
                    "well": well,
                    "site": site,
                    "well_type": _well_type(sirna_id),
                    "sirna": _sirna_name(sirna_id),
                    "sirna_id": sirna_id,
                }
                site, cells = _render_site(spec, rng, side)
                write_site(root, row, site)
                rows.append(row)
                drawn.append({"site_id": row["site_id"], "cells": cells})
    metadata = pl.DataFrame(rows)
    from condeval.core.io import atomic_path

    with atomic_path(root / CELLS_DRAWN) as tmp:
        pl.DataFrame(drawn).write_csv(tmp)
    with atomic_path(root / "metadata.csv") as tmp:
        metadata.write_csv(tmp)
    return metadata


def _well_type(sirna_id: int) -> str:
    if sirna_id == NEGATIVE_CONTROL:
        return "negative_control"
    return "positive_control" if sirna_id >= CONTROL_SIRNA_ID else "treatment"


def _sirna_name(sirna_id: int) -> str:
    return "EMPTY" if sirna_id == NEGATIVE_CONTROL else f"siRNA-{sirna_id}"

"""CReL on image-to-text (Sec. 4.2): folds, shards, the two metrics, and Table 2.

Every val image is one item: its CLIP image feature, its evaluation caption (the smallest
annotation id, :func:`condeval.datasets.coco.evaluation_pairs`) and one sampled caption per model.
All features are unit rows. Per model and metric:

========  ===============================  ==========================================
metric    Y (what the VAE models)          ground truth GT in ρ(Ŷ, GT) = cos(Ŷ, GT)
========  ===============================  ==========================================
``clip``  CLIP text feature of the caption  CLIP image feature of the condition image
``bert``  BERT [CLS] feature of the caption BERT [CLS] feature of the evaluation caption
========  ===============================  ==========================================

The DQR's condition is the image feature and the evaluation caption's BERT feature side by side
(the paper's "input size p + d"): both are known for a test item before any caption is sampled.
"""

from __future__ import annotations

import numpy as np
import polars as pl

__all__ = [
    "FOLDS",
    "FOLD_FRACTIONS",
    "METRICS",
    "assign_folds",
    "metric_arrays",
    "cosine_rows",
    "evaluate_crel",
    "table2",
    "aligned_features",
    "FEATURE_SOURCES",
    "item_arrays",
    "num_z0_curve",
    "nearest_captions",
]

#: The feature shard lists every CReL job of a model reads (see :func:`metric_arrays`).
FEATURE_SOURCES = ("image", "reference_bert", "caption_clip", "caption_bert")

FOLDS = ("vae", "dqr", "cal", "test")
FOLD_FRACTIONS = (0.75, 0.15, 0.05, 0.05)  # Sec. 4.2: VAE, DQR, calibration, test
METRICS = ("clip", "bert")


def assign_folds(image_ids: np.ndarray, seed: int, fractions: tuple[float, ...] = FOLD_FRACTIONS) -> np.ndarray:
    """The fold of every image (``FOLDS`` names), a seeded permutation cut at the fractions.

    The same ids and seed always give the same folds, whatever their order. Calibration and test
    get ``floor(n · fraction)`` images each; the VAE fold takes the rounding remainder.
    """
    ids = np.asarray(image_ids)
    if len(np.unique(ids)) != len(ids):
        raise ValueError("image ids must be unique")
    if len(fractions) != len(FOLDS) or not np.isclose(sum(fractions), 1.0) or min(fractions) <= 0:
        raise ValueError(f"need {len(FOLDS)} positive fractions summing to 1; got {fractions}")
    order = np.argsort(ids, kind="stable")
    permuted = order[np.random.default_rng(seed).permutation(len(ids))]
    sizes = [int(np.floor(len(ids) * f)) for f in fractions[1:]]
    sizes.insert(0, len(ids) - sum(sizes))
    folds = np.empty(len(ids), dtype=object)
    start = 0
    for name, size in zip(FOLDS, sizes):
        folds[permuted[start : start + size]] = name
        start += size
    return folds.astype(str)


def aligned_features(shards: dict[str, list]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Read each named list of feature shards and check they cover the same image ids in order.

    Returns the image ids and one (n, width) array per name. Raises ``ValueError`` naming the
    first source whose ids differ from the first one's.
    """
    from condeval.encoders.features import read_feature_shards

    ids, arrays = None, {}
    for name, paths in shards.items():
        source_ids, features, _ = read_feature_shards(list(paths))
        if ids is None:
            ids = source_ids
        elif not np.array_equal(ids, source_ids):
            raise ValueError(f"feature shards {paths[0]}...: image ids differ from those of {next(iter(shards))}")
        arrays[name] = features.astype(np.float64)
    return ids, arrays


def item_arrays(shards: dict[str, list], metric: str, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(image ids, X, Y, GT, folds) of one metric from the :data:`FEATURE_SOURCES` shard lists."""
    ids, features = aligned_features({name: shards[name] for name in FEATURE_SOURCES})
    X, Y, GT = metric_arrays(metric, **features)
    return ids, X, Y, GT, assign_folds(ids, seed)


def num_z0_curve(crel, X_test, GT_test, num_z0s, *, steps: int, lr: float, seed: int, device=None) -> list[float]:
    """Mean CReL-ρ over the test items for each number of random PGD starts (Fig. 6); calibrated ``crel``."""
    return [float(np.mean(crel.reliability(X_test, GT_test, num_z0=int(k), steps=steps, lr=lr, seed=seed, device=device)[0])) for k in num_z0s]


def nearest_captions(crel, z: np.ndarray, gallery: np.ndarray, texts: list[str], X: np.ndarray | None = None) -> list[str]:
    """The real caption whose feature is closest (cosine) to each decoded latent point ``Dec(z)``.

    ``gallery`` (m, d) holds unit features of the real captions ``texts``; this is how Fig. 4 puts
    words on a model's worst case, which is a point in feature space, not a sentence.
    """
    import torch

    with torch.no_grad():
        decoded = crel.decode_torch(torch.as_tensor(np.asarray(z)), None if X is None else torch.as_tensor(X)).double().numpy()
    decoded /= np.linalg.norm(decoded, axis=1, keepdims=True)
    return [texts[k] for k in np.argmax(decoded @ np.asarray(gallery, np.float64).T, axis=1)]


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity (the features are unit rows, so this is the dot product, renormalised)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def metric_arrays(metric: str, image: np.ndarray, reference_bert: np.ndarray, caption_clip: np.ndarray, caption_bert: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(condition X, output Y, ground truth GT) of one metric, row-aligned per item.

    ``image``: CLIP image features; ``reference_bert``: BERT features of the evaluation captions;
    ``caption_clip`` / ``caption_bert``: features of the model's sampled captions.
    """
    condition = np.hstack([image, reference_bert])
    if metric == "clip":
        return condition, caption_clip, image
    if metric == "bert":
        return condition, caption_bert, reference_bert
    raise ValueError(f"unknown metric {metric!r}; expected one of {METRICS}")


def evaluate_crel(crel, X_cal, Y_cal, X_test, Y_test, GT_test, *, alpha: float, num_z0: int, steps: int, lr: float, seed: int, device=None) -> dict[str, np.ndarray]:
    """Calibrate on the calibration fold, then score every test item.

    Returns per test item: ``rho`` (cos of the sampled caption's feature to GT), ``crel_rho`` (the
    worst ρ in the calibrated region, Eq. 8), ``covered`` (E(y) ∈ S^γ(x)), ``rho_own_code`` (ρ of
    the decoded latent code of the item's own caption) and ``z_worst``. The own code is one of
    the PGD starts, so for a covered item ``crel_rho <= rho_own_code``.
    """
    import torch

    crel.calibrate(X_cal, Y_cal, alpha)
    codes = crel.encode(X_test, Y_test)
    covered = crel.contains(X_test, Y_test)
    worst, z_worst = crel.reliability(X_test, GT_test, num_z0=num_z0, steps=steps, lr=lr, seed=seed, device=device, extra_starts=codes)
    with torch.no_grad():
        decoded = crel.decode_torch(torch.as_tensor(codes), torch.as_tensor(X_test)).double().numpy()
    return {
        "rho": cosine_rows(Y_test, GT_test),
        "crel_rho": worst,
        "covered": covered,
        "rho_own_code": cosine_rows(decoded, GT_test),
        "z_worst": z_worst,
        "gamma_cal": np.full(len(worst), crel.gamma_cal_),
    }


def _ranks(values: pl.Expr) -> pl.Expr:
    return values.rank(method="min", descending=True).cast(pl.Int64)


def table2(scores: pl.DataFrame) -> pl.DataFrame:
    """Table 2 from per-item scores with columns ``model``, ``metric``, ``rho``, ``crel_rho``.

    One row per (model, metric): mean ρ and its rank, CReL-ρ (the mean of the per-item worst
    cases) and its rank, Δ = CReL-ρ − ρ; rank 1 is the most reliable model of that metric.
    """
    summary = scores.group_by("metric", "model", maintain_order=True).agg(
        pl.col("rho").mean().alias("mean_rho"), pl.col("crel_rho").mean().alias("crel_rho"), pl.len().alias("n_test")
    )
    return summary.with_columns(
        (pl.col("crel_rho") - pl.col("mean_rho")).alias("delta"),
        _ranks(pl.col("mean_rho")).over("metric").alias("rank_mean"),
        _ranks(pl.col("crel_rho")).over("metric").alias("rank_crel"),
    ).sort("metric", "model")

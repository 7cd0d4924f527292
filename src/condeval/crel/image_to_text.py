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

The condition X (``crel.image_to_text.condition``) is the image feature alone (``image``, Sec. 4.2
conditions on the image), or the image feature and the evaluation caption's BERT feature side by
side (``image+reference``, an earlier reading of the paper's "input size p + d", which puts
BERT-SIM's ground truth inside the condition).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from condeval.core.conformal import mean_interval
from condeval.core.io import check_finite
from condeval.metrics import cosine_similarity, unit_rows

log = logging.getLogger(__name__)

__all__ = [
    "CONDITIONS",
    "FOLDS",
    "FOLD_FRACTIONS",
    "METRICS",
    "condition_features",
    "decoded_points",
    "nearest_distances",
    "manifold_check",
    "temperature_table",
    "assign_folds",
    "assign_unit_folds",
    "metric_arrays",
    "cosine_rows",
    "CalibrationFold",
    "evaluate_crel",
    "table2",
    "aligned_features",
    "FEATURE_SOURCES",
    "item_arrays",
    "num_z0_curve",
    "nearest_captions",
    "fit_on_folds",
    "crels_from_files",
]

#: The feature shard lists every CReL job of a model reads (see :func:`metric_arrays`).
FEATURE_SOURCES = ("image", "reference_bert", "caption_clip", "caption_bert")
# Sources that a metric compares with each other: one encoder must have made each group.
ONE_ENCODER_SOURCES = (("image", "caption_clip"), ("reference_bert", "caption_bert"))
#: the encoder (``clip`` or ``bert``) that makes each feature source.
SOURCE_ENCODERS = {"image": "clip", "caption_clip": "clip", "reference_bert": "bert", "caption_bert": "bert"}

FOLDS = ("vae", "dqr", "cal", "test")
FOLD_FRACTIONS = (0.75, 0.15, 0.05, 0.05)  # Sec. 4.2: VAE, DQR, calibration, test
METRICS = ("clip", "bert")
CONDITIONS = ("image", "image+reference")


def assign_folds(image_ids: np.ndarray, seed: int, fractions: tuple[float, ...] = FOLD_FRACTIONS) -> np.ndarray:
    """The fold of every image (``FOLDS`` names), a seeded permutation cut at the fractions.

    The same ids and seed always give the same folds, whatever their order. Calibration and test
    get ``floor(n · fraction)`` images each; the VAE fold takes the rounding remainder. Too few images
    for every fold to get one is refused (an empty calibration fold would only fail later, in ``calibrate``).
    """
    from condeval.core.io import check_integer

    check_integer(seed, "seed")
    ids = np.asarray(image_ids)
    if len(np.unique(ids)) != len(ids):
        raise ValueError(
            "image ids must be unique; rows that share an exchangeable unit (one condition's "
            "outputs, one image's captions) take assign_unit_folds"
        )
    if len(fractions) != len(FOLDS) or not np.isclose(sum(fractions), 1.0) or min(fractions) <= 0:
        raise ValueError(f"need {len(FOLDS)} positive fractions summing to 1; got {fractions}")
    order = np.argsort(ids, kind="stable")
    permuted = order[np.random.default_rng(seed).permutation(len(ids))]
    sizes = [int(np.floor(len(ids) * f)) for f in fractions[1:]]
    sizes.insert(0, len(ids) - sum(sizes))
    empty = [name for name, size in zip(FOLDS, sizes, strict=True) if size == 0]
    if empty:
        raise ValueError(
            f"{len(ids)} units leave the fold(s) {empty} empty at fractions {fractions}: "
            f"need at least {int(np.ceil(1 / min(fractions)))} units"
        )
    folds = np.empty(len(ids), dtype=object)
    start = 0
    for name, size in zip(FOLDS, sizes):
        folds[permuted[start : start + size]] = name
        start += size
    return folds.astype(str)


def assign_unit_folds(unit_ids, seed: int, fractions: tuple[float, ...] = FOLD_FRACTIONS) -> np.ndarray:
    """The fold of every row when rows share an exchangeable unit (several outputs of one condition,
    the captions of one image): :func:`assign_folds` over the units, each row taking its unit's fold,
    so that no unit lies in two folds and calibration is exchangeable with a new condition. The
    fractions are of units, not rows. A missing id (None, NaN) or ids that do not sort together are
    refused (:func:`condeval.core.conformal.unit_index`): a missing id must not merge rows of different
    units into one.

    Examples
    --------
    >>> import numpy as np
    >>> from condeval.crel.image_to_text import assign_unit_folds
    >>> images = np.repeat(np.arange(40), 5)                  # five captions of each of 40 images
    >>> folds = assign_unit_folds(images, seed=0)
    >>> all(len(set(folds[images == i])) == 1 for i in range(40))   # an image's captions share one fold
    True
    >>> names, rows = np.unique(folds, return_counts=True)
    >>> dict(zip(names.tolist(), (rows // 5).tolist()))      # images per fold: 75/15/5/5 % of 40
    {'cal': 2, 'dqr': 6, 'test': 2, 'vae': 30}
    >>> assign_unit_folds([1.0, np.nan, 2.0], seed=0)
    Traceback (most recent call last):
    ...
    ValueError: unit_ids has a missing id at row 1: every row needs one
    """
    from condeval.core.conformal import unit_index

    if np.ndim(unit_ids) != 1:
        raise ValueError(f"unit_ids must be one id per row (1-D); got shape {np.shape(unit_ids)}")
    unit_of_row = unit_index(unit_ids, "unit_ids")
    # assign_folds reads only the ids' order, which unit_index's 0..n_units - 1 keep
    return assign_folds(np.arange(len(np.unique(unit_of_row))), seed, fractions)[unit_of_row]


def aligned_features(
    shards: dict[str, list],
    encoders: dict | None = None,
    source_encoders: Mapping[str, str] | None = None,
    groups: tuple[tuple[str, ...], ...] = ONE_ENCODER_SOURCES,
    subset: bool = False,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Read each named list of feature shards and check they cover the same image ids in order.

    With ``subset``, the first source's ids are the items and every other source may hold more
    images: its rows of those ids are taken (a missing id is an error naming the source).

    Returns the image ids and one (n, width) array per name. Raises ``ValueError`` naming the
    first source whose ids differ from the first one's, and when the sources of one group of
    ``groups`` (default :data:`ONE_ENCODER_SOURCES`) come from different encoders. ``encoders`` maps
    an encoder name (``clip``, ``bert``) to the encoder the caller uses (saved folder or its
    manifest): every shard of a source must have been made by its ``source_encoders`` encoder
    (default :data:`SOURCE_ENCODERS`), or ``FeatureShardError`` names it.
    """
    from condeval.encoders.shards import check_one_encoder, read_feature_shards

    encoders = encoders or {}
    source_encoders = SOURCE_ENCODERS if source_encoders is None else source_encoders
    ids, arrays, metadata = None, {}, {}
    for name, paths in shards.items():
        encoder = encoders.get(source_encoders.get(name))
        source_ids, features, metadata[name] = read_feature_shards(list(paths), encoder=encoder)
        unique, counts = np.unique(source_ids, return_counts=True)
        if (counts > 1).any():
            raise ValueError(
                f"feature shards {paths[0]}...: image id {unique[counts > 1][0]} has {counts.max()} rows; "
                "one row per image"
            )
        if ids is None:
            ids = source_ids
        elif subset and not np.array_equal(ids, source_ids):
            features = features[_rows_of(ids, source_ids, f"feature shards {paths[0]}...")]
        elif not np.array_equal(ids, source_ids):
            raise ValueError(f"feature shards {paths[0]}...: image ids differ from those of {next(iter(shards))}")
        arrays[name] = features.astype(np.float64)
    for group in groups:
        check_one_encoder({name: metadata[name] for name in group if name in metadata})
    return ids, arrays


def _rows_of(ids: np.ndarray, source_ids: np.ndarray, source: str) -> np.ndarray:
    """Row of each of ``ids`` in ``source_ids`` (``ValueError`` naming ``source`` if one is absent)."""
    order = np.argsort(source_ids, kind="stable")
    found = np.searchsorted(source_ids, ids, sorter=order)
    rows = order[np.minimum(found, len(order) - 1)]
    missing = ids[source_ids[rows] != ids] if len(order) else ids
    if len(missing):
        raise ValueError(f"{source}: no features of image ids {missing[:5].tolist()} ({len(missing)} missing)")
    return rows


def item_arrays(
    shards: dict[str, list], metric: str, seed: int, condition: str = "image", encoders: dict | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(image ids, X, Y, GT, folds) of one metric from the :data:`FEATURE_SOURCES` shard lists
    (``encoders``: as in :func:`aligned_features`)."""
    ids, features = aligned_features({name: shards[name] for name in FEATURE_SOURCES}, encoders)
    X, Y, GT = metric_arrays(metric, **features, condition=condition)
    return ids, X, Y, GT, assign_folds(ids, seed)


def num_z0_curve(
    crel,
    X_test,
    Y_test,
    GT_test,
    num_z0s,
    *,
    search,  # a SearchSettings, not imported: the table jobs' environment stays without tqdm
    device=None,
    searched: Mapping[int, Mapping[str, np.ndarray]] | None = None,
) -> list[dict]:
    """CReL-ρ against the number of random PGD starts (Fig. 6); ``crel`` calibrated.

    Each point runs the very search of :func:`evaluate_crel` (``search`` with its ``num_z0`` replaced, the
    items' own codes as extra starts), so the point at Table 2's ``num_z0`` is Table 2's CReL-ρ.
    ``searched`` holds searches already run with this setting on these items, by ``num_z0`` (Table
    2's: :func:`evaluate_crel`'s ``crel_rho`` and ``converged``); their points are not searched again.
    Returns per ``num_z0``: the mean CReL-ρ, its standard error over the items and the fraction of
    items whose search converged.
    """
    from condeval.core.io import check_integer

    num_z0s = [check_integer(k, f"num_z0s[{i}]", least=1) for i, k in enumerate(num_z0s)]
    searched = searched or {}
    rho = cosine_rows(Y_test, GT_test)
    for k, out in searched.items():
        if len(out["crel_rho"]) != len(X_test):
            raise ValueError(f"the search at num_z0 = {k} scored {len(out['crel_rho'])} items, not {len(X_test)}")
        if "rho" in out and not np.allclose(out["rho"], rho):  # evaluate_crel's record of its items
            raise ValueError(
                f"the search at num_z0 = {k} scored other items than X_test, Y_test, GT_test "
                "(its rho differs): searched holds searches of these items only"
            )
    curve = []
    for k in num_z0s:
        out = (
            searched[int(k)]
            if int(k) in searched
            else _worst_case(crel, X_test, Y_test, GT_test, replace(search, num_z0=int(k)), device)
        )
        worst = out["crel_rho"]
        se = float(np.std(worst, ddof=1) / np.sqrt(len(worst))) if len(worst) > 1 else float("nan")
        curve.append(
            {
                "num_z0": int(k),
                "crel_rho": float(np.mean(worst)),
                "se": se,
                "converged": float(np.mean(out["converged"])),
            }
        )
    return curve


def decoded_points(crel, z: np.ndarray, X: np.ndarray | None = None) -> np.ndarray:
    """Unit rows ``Dec(z, x) / ||Dec(z, x)||`` of latent points ``z`` (n, r) under conditions ``X``."""
    import torch

    with torch.no_grad():
        decoded = (
            crel.decode_torch(torch.as_tensor(np.asarray(z)), None if X is None else torch.as_tensor(X))
            .double()
            .numpy()
        )
    return unit_rows(decoded)


def nearest_captions(
    crel, z: np.ndarray, gallery: np.ndarray, texts: list[str], X: np.ndarray | None = None
) -> list[str]:
    """The real caption whose feature is closest (cosine) to each decoded latent point ``Dec(z)``.

    ``gallery`` (m, d) holds unit features of the real captions ``texts``; this is how Fig. 4 puts
    words on a model's worst case, which is a point in feature space, not a sentence.
    """
    decoded = decoded_points(crel, z, X)
    return [texts[k] for k in np.argmax(decoded @ np.asarray(gallery, np.float64).T, axis=1)]


def nearest_distances(
    points: np.ndarray, gallery: np.ndarray, exclude: np.ndarray | None = None, chunk: int = 1024
) -> np.ndarray:
    """Cosine distance ``1 − max_j cos(points_i, gallery_j)`` from each point to its nearest gallery row.

    ``exclude`` (n,) names, per point, one gallery row to leave out (a real caption's own row, for
    its distance to the nearest *other* caption); -1 leaves none out.
    """
    points, gallery = unit_rows(points), unit_rows(gallery)
    if len(gallery) < 2:
        raise ValueError(f"the gallery needs at least 2 rows; got {len(gallery)}")
    out = np.empty(len(points))
    for s in range(0, len(points), chunk):
        cos = points[s : s + chunk] @ gallery.T
        if exclude is not None:
            rows = np.arange(len(cos))
            own = np.asarray(exclude[s : s + chunk])
            cos[rows[own >= 0], own[own >= 0]] = -np.inf
        out[s : s + chunk] = 1.0 - cos.max(axis=1)
    return out


def manifold_check(
    worst: np.ndarray, sampled: np.ndarray, gallery: np.ndarray, own_rows: np.ndarray
) -> dict[str, np.ndarray]:
    """How far each item's worst case lies from real captions, beside how far real captions lie.

    ``worst`` (n, d): decoded worst-case points; ``sampled`` (n, d): the captions the model wrote;
    ``gallery`` (m, d): features of the real (evaluation) captions; ``own_rows`` (n,): each item's
    own row of ``gallery``. Returns per item the cosine distance to the nearest real caption of the
    worst case (``worst_nn_distance``) and of the sampled caption (``caption_nn_distance``), and
    the distance of the item's own real caption to the nearest other one (``reference_nn_distance``).
    A worst case near the feature manifold is no farther than real captions are from each other.
    """
    return {
        "worst_nn_distance": nearest_distances(worst, gallery),
        "caption_nn_distance": nearest_distances(sampled, gallery),
        "reference_nn_distance": nearest_distances(
            np.asarray(gallery)[own_rows], gallery, exclude=np.asarray(own_rows)
        ),
    }


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity, float64 (:func:`condeval.metrics.cosine_similarity`)."""
    return cosine_similarity(np.asarray(a, np.float64), np.asarray(b, np.float64))


def feature_sources(sources: Mapping[str, np.ndarray], pairs: tuple[tuple[str, str], ...]) -> dict[str, np.ndarray]:
    """``sources`` as numeric, finite (n, width) arrays of one n, each pair of ``pairs`` of one width.

    A metric's sources are its items' features from two encoders: a source with another item count
    (per-caption features beside per-image ones) or of the other encoder (two sources swapped) is
    refused naming them, before it could be paired row by row.
    """
    arrays = {}
    for name, values in sources.items():
        array = np.asarray(values)
        if array.ndim != 2 or not np.issubdtype(array.dtype, np.number):
            raise ValueError(f"{name} must be a numeric (n, width) array; got {array.dtype} {array.shape}")
        arrays[name] = check_finite(array, name)
    rows = {name: len(values) for name, values in arrays.items()}
    if len(set(rows.values())) > 1:
        raise ValueError(f"the sources must hold one row per item, the same n; got {rows}")
    for first, second in pairs:
        if arrays[first].shape[1] != arrays[second].shape[1]:
            raise ValueError(
                f"{first} and {second} must come from one encoder (one width); got "
                f"{arrays[first].shape[1]} and {arrays[second].shape[1]}"
            )
    return arrays


def condition_features(condition: str, image: np.ndarray, reference_bert: np.ndarray) -> np.ndarray:
    """The condition X of every item: ``image`` (the CLIP image feature) or ``image+reference``
    (it and the evaluation caption's BERT feature side by side)."""
    if condition == "image":
        return np.asarray(image)
    if condition == "image+reference":
        return np.hstack([image, reference_bert])
    raise ValueError(f"crel.image_to_text.condition: unknown condition {condition!r}; expected one of {CONDITIONS}")


def metric_arrays(
    metric: str,
    image: np.ndarray,
    reference_bert: np.ndarray,
    caption_clip: np.ndarray,
    caption_bert: np.ndarray,
    *,
    condition: str = "image",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(condition X, output Y, ground truth GT) of one metric, row-aligned per item.

    ``image``: CLIP image features; ``reference_bert``: BERT features of the evaluation captions;
    ``caption_clip`` / ``caption_bert``: features of the model's sampled captions; ``condition``:
    see :func:`condition_features`. The sources are checked by :func:`feature_sources` (one n; the
    CLIP sources of one width, the BERT ones of another).
    """
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; expected one of {METRICS}")
    sources = feature_sources(
        {"image": image, "reference_bert": reference_bert, "caption_clip": caption_clip, "caption_bert": caption_bert},
        ONE_ENCODER_SOURCES,
    )
    condition = condition_features(condition, sources["image"], sources["reference_bert"])
    if metric == "clip":
        return condition, sources["caption_clip"], sources["image"]
    return condition, sources["caption_bert"], sources["reference_bert"]


@dataclass(frozen=True, eq=False)
class CalibrationFold:
    """The rows :func:`evaluate_crel` calibrates CReL on, with their exchangeable units.

    Parameters
    ----------
    X : ndarray (n, p)
        Conditions of the calibration rows.
    Y : ndarray (n, d)
        Their responses (in the LGM's output space).
    groups : array_like (n,), optional
        Each row's exchangeable unit (e.g. its image, where a fold holds several captions of one image),
        passed to :meth:`CReL.calibrate <condeval.crel.CReL.calibrate>`; None takes the rows as exchangeable.

    Examples
    --------
    Two captions of each of 20 images: with ``groups``, γ_cal is the quantile of each image's largest
    E⁺, one score per image. Untrained models stand in for a fitted CReL.

    >>> import numpy as np, torch
    >>> from condeval.crel import CReL
    >>> from condeval.crel.models.dqr import DirectionalQuantileRegressor
    >>> from condeval.crel.models.vae import LatentVAE
    >>> from condeval.crel.image_to_text import CalibrationFold
    >>> _ = torch.manual_seed(0)
    >>> crel = CReL.from_models(LatentVAE(4, latent_dim=2, hidden_dims=[8, 8]),
    ...                         DirectionalQuantileRegressor(3, 2, hidden_dims=[8], n_directions=16), "cosine")
    >>> rng = np.random.default_rng(0)
    >>> X = np.repeat(rng.normal(size=(20, 3)), 2, axis=0)       # each image's feature, once per caption
    >>> fold = CalibrationFold(X, rng.normal(size=(40, 4)), groups=np.repeat(np.arange(20), 2))
    >>> crel = crel.calibrate(fold.X, fold.Y, alpha=0.2, groups=fold.groups)
    >>> len(crel.scores_cal_)                                    # one E+ per image, not per caption
    20
    """

    X: np.ndarray
    Y: np.ndarray
    groups: np.ndarray | None = None


def evaluate_crel(
    crel,
    calibration: CalibrationFold,
    X_test,
    Y_test,
    GT_test,
    *,
    alpha: float,
    search,  # a SearchSettings, not imported: the table jobs' environment stays without tqdm
    device=None,
) -> dict[str, np.ndarray]:
    """Calibrate on the calibration fold, then score every test item.

    ``calibration`` holds the calibration rows and, in ``groups``, each row's exchangeable unit (e.g. its
    image, where a fold holds several captions of one image), passed to :meth:`CReL.calibrate`: the bound
    then covers every caption of a new unit. Without groups the rows are taken as exchangeable.

    Returns per test item: ``rho`` (cos of the sampled caption's feature to GT), ``crel_rho`` (the
    worst ρ in the calibrated region, Eq. 8), ``covered`` (E(y) ∈ S^γ(x)), ``rho_own_code`` (ρ of
    the decoded latent code of the item's own caption), ``z_worst``, and the search's record
    (``converged``, ``last_improvement``, ``steps_run``; ``search`` sets its starts and stopping rule,
    :class:`~condeval.core.settings.SearchSettings`). The own code is one of the PGD starts,
    so for a covered item ``crel_rho <= rho_own_code``.

    ``rho`` and ``rho_own_code`` are cosines (Tables 2 and 3 compare ρ and CReL-ρ in it), so ``crel``
    must search in it too: ``CReL(CReLSettings(metric="cosine"))`` or ``CReL.from_checkpoints(..., metric="cosine")``
    (the latent model may have been trained on another loss); another metric is refused, since CReL-ρ
    would be a −MSE set against cosines.

    Examples
    --------
    Untrained models stand in for a fitted CReL (:meth:`CReL.from_models
    <condeval.crel.CReL.from_models>`); the relations shown hold for any.

    >>> import numpy as np, torch
    >>> from condeval.core.settings import SearchSettings
    >>> from condeval.crel import CReL
    >>> from condeval.crel.models.dqr import DirectionalQuantileRegressor
    >>> from condeval.crel.models.vae import LatentVAE
    >>> from condeval.crel.image_to_text import CalibrationFold, evaluate_crel
    >>> _ = torch.manual_seed(0)
    >>> lgm = LatentVAE(4, latent_dim=2, hidden_dims=[8, 8])
    >>> dqr = DirectionalQuantileRegressor(3, 2, hidden_dims=[8], n_directions=16)
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 3))
    >>> Y = np.hstack([X, X[:, :1] ** 2])
    >>> Y /= np.linalg.norm(Y, axis=1, keepdims=True)                 # unit rows, as CLIP or BERT features
    >>> GT = Y + 0.1 * rng.normal(size=Y.shape)
    >>> search = SearchSettings(num_z0=4, steps=10, progress=False)
    >>> out = evaluate_crel(CReL.from_models(lgm, dqr, "cosine"), CalibrationFold(X[:40], Y[:40]),
    ...                     X[40:], Y[40:], GT[40:], alpha=0.2, search=search)
    >>> covered = out["covered"]
    >>> bool((out["crel_rho"][covered] <= out["rho_own_code"][covered] + 1e-5).all())  # the own code is a start
    True
    >>> evaluate_crel(CReL.from_models(lgm, dqr, "mse"), CalibrationFold(X[:40], Y[:40]),
    ...               X[40:], Y[40:], GT[40:], alpha=0.2, search=search)
    Traceback (most recent call last):
    ...
    ValueError: evaluate_crel compares cosines: this CReL's worst case is searched in 'mse'; build it with metric='cosine' (CReL.from_checkpoints(..., metric='cosine'))
    """
    if crel.metric != "cosine":
        raise ValueError(
            f"evaluate_crel compares cosines: this CReL's worst case is searched in {crel.metric!r}; "
            "build it with metric='cosine' (CReL.from_checkpoints(..., metric='cosine'))"
        )
    crel.calibrate(calibration.X, calibration.Y, alpha, groups=calibration.groups)
    out = _worst_case(crel, X_test, Y_test, GT_test, search, device)
    return {
        "rho": cosine_rows(Y_test, GT_test),
        **out,
        "covered": crel.contains(X_test, Y_test),
        "gamma_cal": np.full(len(X_test), crel.gamma_cal_),
    }


def _worst_case(crel, X, Y, GT, search, device=None) -> dict[str, np.ndarray]:
    """The one search behind Table 2 and Fig. 6: ``search.num_z0`` random starts plus each item's own code."""
    codes = crel.encode(X, Y)
    worst, z_worst, info = crel.reliability(X, GT, search=search, device=device, extra_starts=codes, return_info=True)
    return {
        "crel_rho": worst,
        "rho_own_code": cosine_rows(decoded_points(crel, codes, X), GT),
        "z_worst": z_worst,
        **info,
    }


def temperature_table(scores: pl.DataFrame, temperatures: dict[str, float]) -> pl.DataFrame:
    """Table 2's summary of one captioner sampled at several temperatures (the temperature ablation).

    ``scores``: per-item scores whose ``model`` column names the variants, keys of ``temperatures``
    (variant name → temperature). Ranks are across temperatures within a metric.
    """
    unknown = set(scores["model"].unique().to_list()) - set(temperatures)
    if unknown:
        raise ValueError(f"scores of {sorted(unknown)}, which no temperature names")
    return table2(scores).with_columns(
        pl.col("model").replace_strict(temperatures, return_dtype=pl.Float64).alias("temperature")
    )


def _check_scores(scores, metrics: tuple[str, ...] = METRICS) -> None:
    """Per-item scores a table can rank: a polars DataFrame with its columns and rows, a model and one of
    ``metrics`` on every row, every ρ and CReL-ρ a finite number, each item (``image_id``) once per
    model and metric."""
    needed = ("model", "metric", "rho", "crel_rho")
    if not isinstance(scores, pl.DataFrame):
        raise TypeError(
            f"scores must be a polars DataFrame with columns {', '.join(needed)} (one row per test "
            f"item, e.g. pl.DataFrame(evaluate_crel(...)) with model and metric added); got "
            f"{type(scores).__name__}"
        )
    missing = [column for column in needed if column not in scores.columns]
    if missing:
        raise ValueError(f"scores have no column {missing[0]!r} (need {', '.join(needed)})")
    if scores.height == 0:
        raise ValueError("scores have no rows: nothing to rank")
    if scores["model"].null_count():
        raise ValueError(f"{scores['model'].null_count()} score rows have no model")
    unknown = sorted(set(scores["metric"].to_list()) - set(metrics), key=str)
    if unknown:
        raise ValueError(f"scores hold metric(s) {unknown}; this table's are {list(metrics)}")
    for column in ("rho", "crel_rho"):
        if not scores[column].dtype.is_numeric():
            raise TypeError(f"{column} must be numeric; got {scores[column].dtype}")
    if "image_id" in scores.columns:
        repeated = scores.filter(pl.struct("model", "metric", "image_id").is_duplicated())
        if repeated.height:
            first = repeated.row(0, named=True)
            raise ValueError(
                f"image {first['image_id']} appears more than once for model {first['model']!r}, "
                f"metric {first['metric']!r} ({repeated.height} rows repeat an item): one row per test item"
            )
    for column in ("rho", "crel_rho"):
        bad = scores.filter(~pl.col(column).cast(pl.Float64).is_finite().fill_null(False))
        if bad.height:
            first = bad.row(0, named=True)
            raise ValueError(
                f"{column} of model {first['model']!r}, metric {first['metric']!r} is {first[column]} "
                f"in {bad.height} rows: a NaN or missing score would be ranked, not averaged"
            )


def _warn_of_other_items(scores: pl.DataFrame) -> None:
    """Log where the models of one metric were scored on different items (``image_id``): the paper ranks
    captioners on the same test images, and a mean over other items ranks other questions."""
    if "image_id" not in scores.columns:
        return
    for (metric,), rows in scores.group_by("metric", maintain_order=True):
        items = {model: frozenset(group["image_id"].to_list()) for (model,), group in rows.group_by("model")}
        if len(set(items.values())) > 1:
            shared = frozenset.intersection(*items.values())
            log.warning(
                "table2: the %s models were scored on different items (%s; %d shared): their ranks "
                "compare means over other images",
                metric,
                ", ".join(f"{model} {len(ids)}" for model, ids in sorted(items.items())),
                len(shared),
            )


def _ranks(values: pl.Expr) -> pl.Expr:
    return values.rank(method="min", descending=True).cast(pl.Int64)


#: Optional per-item columns of the scores and how Table 2 summarises them (mean or median).
_TABLE2_EXTRAS = {
    "rho_own_code": pl.mean,
    "converged": pl.mean,
    "worst_nn_distance": pl.median,
    "caption_nn_distance": pl.median,
    "reference_nn_distance": pl.median,
}


def _paired_items(rows: pl.DataFrame, column: str) -> dict[str, np.ndarray] | None:
    """Each model's ``column`` on the items every model of ``rows`` scored (by ``image_id``, else by
    position when every model has as many); None when they cannot be paired."""
    if "image_id" in rows.columns:
        wide = rows.pivot(on="model", index="image_id", values=column, aggregate_function="first").drop_nulls()
        return {model: wide[model].to_numpy() for model in wide.columns if model != "image_id"}
    by_model = {model: group[column].to_numpy() for (model,), group in rows.group_by("model", maintain_order=True)}
    return by_model if len({len(values) for values in by_model.values()}) == 1 else None


def resolved_rank_changes(scores: pl.DataFrame, seed: int = 0) -> dict[tuple[str, str], bool]:
    """Whether each model's change of rank from ρ to CReL-ρ is measured, by (metric, model): True when
    some other model it swaps order with differs from it in both ρ and CReL-ρ by a paired 95% bootstrap
    interval of the per-item difference that excludes zero (:func:`~condeval.core.conformal.mean_interval`); a rank change at a
    few dozen items is otherwise noise."""
    resolved = {}
    for (metric,), rows in scores.group_by("metric", maintain_order=True):
        rho, crel_rho = _paired_items(rows, "rho"), _paired_items(rows, "crel_rho")
        models = sorted(rows["model"].unique().to_list())
        for model in models:
            resolved[(metric, model)] = rho is not None and any(
                _swap_resolved(rho[model] - rho[other], crel_rho[model] - crel_rho[other], seed)
                for other in models
                if other != model
            )
    return resolved


def _swap_resolved(rho_difference: np.ndarray, crel_difference: np.ndarray, seed: int) -> bool:
    """Both differences' intervals exclude zero, with opposite signs: the two models swap order."""
    (rho_low, rho_high), (crel_low, crel_high) = (
        mean_interval(d, seed=seed) for d in (rho_difference, crel_difference)
    )
    return bool((rho_low > 0 and crel_high < 0) or (rho_high < 0 and crel_low > 0))


def table2(scores: pl.DataFrame, metrics: tuple[str, ...] = METRICS) -> pl.DataFrame:
    """Table 2 from per-item scores with columns ``model``, ``metric``, ``rho``, ``crel_rho``.

    One row per (model, metric): mean ρ and its rank, CReL-ρ (the mean of the per-item worst
    cases) and its rank, Δ = CReL-ρ − ρ; rank 1 is the most reliable model of that metric.
    Where the scores hold them: mean ρ at the items' own decoded codes (``rho_own_code``), with Δ
    split into ``reconstruction`` = ρ(own code) − ρ and ``worst_case`` = CReL-ρ − ρ(own code);
    the fraction of converged searches; median nearest-real-caption distances (:func:`manifold_check`).
    Each mean has its 95% bootstrap interval over the items (``mean_rho_low`` / ``_high``,
    ``crel_rho_low`` / ``_high``: :func:`~condeval.core.conformal.mean_interval`), and ``rank_change_resolved`` says whether a
    change of rank is measured rather than noise (:func:`resolved_rank_changes`).
    ``metrics``: those a row may name (image-to-text's, :data:`METRICS`; Table 3 passes its own).

    Examples
    --------
    Model ``b``'s captions score lower than ``a``'s, but its worst cases are higher: the ranks swap, and
    the paired intervals over the 40 shared images say the swap is measured.

    >>> import numpy as np, polars as pl
    >>> from condeval.crel.image_to_text import table2
    >>> rng = np.random.default_rng(0)
    >>> rho = rng.uniform(0.6, 0.9, 40)
    >>> scores = pl.DataFrame({
    ...     "model": ["a"] * 40 + ["b"] * 40, "metric": "clip", "image_id": list(range(40)) * 2,
    ...     "rho": np.r_[rho, rho - 0.1 + 0.02 * rng.normal(size=40)],
    ...     "crel_rho": np.r_[rho - 0.5, rho - 0.3 + 0.02 * rng.normal(size=40)]})
    >>> table = table2(scores)
    >>> table.select("model", "rank_mean", "rank_crel", "rank_change_resolved").rows()
    [('a', 1, 2, True), ('b', 2, 1, True)]
    >>> [round(delta, 2) for delta in table["delta"]]                  # CReL-ρ − ρ
    [-0.5, -0.21]
    """
    _check_scores(scores, metrics)
    _warn_of_other_items(scores)
    extras = [summarise(name).alias(name) for name, summarise in _TABLE2_EXTRAS.items() if name in scores.columns]
    summary = scores.group_by("metric", "model", maintain_order=True).agg(
        pl.col("rho").mean().alias("mean_rho"),
        pl.col("crel_rho").mean().alias("crel_rho"),
        pl.len().alias("n_test"),
        *extras,
    )
    if "rho_own_code" in summary.columns:
        summary = summary.with_columns(
            (pl.col("rho_own_code") - pl.col("mean_rho")).alias("reconstruction"),
            (pl.col("crel_rho") - pl.col("rho_own_code")).alias("worst_case"),
        )
    summary = summary.with_columns(
        (pl.col("crel_rho") - pl.col("mean_rho")).alias("delta"),
        _ranks(pl.col("mean_rho")).over("metric").alias("rank_mean"),
        _ranks(pl.col("crel_rho")).over("metric").alias("rank_crel"),
    )
    return summary.join(_intervals(scores), on=["metric", "model"]).sort("metric", "model")


def _intervals(scores: pl.DataFrame) -> pl.DataFrame:
    """Per (metric, model): the items' bootstrap intervals of ρ and CReL-ρ and whether a rank change is measured."""
    resolved = resolved_rank_changes(scores)
    rows = []
    for (metric, model), group in scores.group_by("metric", "model", maintain_order=True):
        (rho_low, rho_high), (crel_low, crel_high) = (mean_interval(group[c].to_numpy()) for c in ("rho", "crel_rho"))
        rows.append(
            {
                "metric": metric,
                "model": model,
                "mean_rho_low": rho_low,
                "mean_rho_high": rho_high,
                "crel_rho_low": crel_low,
                "crel_rho_high": crel_high,
                "rank_change_resolved": resolved[(metric, model)],
            }
        )
    return pl.DataFrame(rows)


def fit_on_folds(X, Y, folds, run_dir, *, vae: Mapping, dqr: Mapping, seed: int, accelerator: str = "cpu"):
    """:meth:`condeval.crel.CReL.fit` on the VAE and DQR folds with a track's ``vae`` and ``dqr`` settings
    (cosine metric; ``vae.val_fraction`` of both folds held out for early stopping, default 0.1; batch
    sizes and patience :class:`~condeval.crel.CReLSettings`' defaults); the image-to-text and
    text-to-image fits both go through here, resumable in ``run_dir``."""
    from condeval.crel import CReL, CReLSettings

    defaults = CReLSettings()
    settings = CReLSettings(
        latent_dim=vae["latent_dim"],
        beta=vae["beta"],
        metric="cosine",
        quantile_level=dqr["quantile_level"],
        val_fraction=vae.get("val_fraction", 0.1),
        seed=seed,
        work_dir=run_dir,
        lgm=replace(defaults.lgm, epochs=vae["max_epochs"], accelerator=accelerator, lr=vae["lr"]),
        dqr=replace(defaults.dqr, epochs=dqr["max_epochs"], accelerator=accelerator),
        lgm_kwargs={
            "hidden_dims": list(vae["hidden_dims"]),
            "dropout": vae["dropout"],
            "batch_norm": vae["batch_norm"],
        },
        dqr_kwargs={
            "hidden_dims": list(dqr["hidden_dims"]),
            "n_directions": dqr["n_directions"],
            "directions_per_step": dqr["directions_per_step"],
        },
    )
    return CReL(settings).fit(X[folds == "vae"], Y[folds == "vae"], X[folds == "dqr"], Y[folds == "dqr"])


def crels_from_files(models: Mapping[str, Mapping[str, Mapping[str, str]]]) -> dict:
    """{(model, metric): CReL} from ``{model: {metric: {"lgm": ckpt, "dqr": ckpt}}}`` (Figs. 4 and 12)."""
    from condeval.crel import CReL

    return {
        (model, metric): CReL.from_checkpoints(paths["lgm"], paths["dqr"], metric="cosine")
        for model, metrics in models.items()
        for metric, paths in metrics.items()
    }

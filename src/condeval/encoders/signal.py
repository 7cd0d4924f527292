"""Does an encoder carry signal? Retrieval, foil gaps and caption agreement on held-out images.

A miniature must be measured, not assumed: these figures go to docs/crel/results.md and a test holds CLIP's
retrieval above a floor, so a broken encoder fails CI.
"""

from __future__ import annotations

import numpy as np

from condeval.core.conformal import mean_interval, unit_bootstrap_interval
from condeval.datasets.miniworld import SHAPES, swap_shape_noun

__all__ = ["retrieval_at_k", "clip_signal", "shape_naming", "bert_signal"]


def retrieval_at_k(image_features: np.ndarray, text_features: np.ndarray, ks=(1, 5)) -> dict[str, float]:
    """Image→text recall@k: row i's own caption (row i of ``text_features``) among the top k of all, with
    its 95% interval over the query images (``R@k_low``, ``R@k_high``; the gallery fixed).

    Features are unit rows; ties count against the true caption.
    """
    scores = image_features @ text_features.T
    rank = (scores >= np.diag(scores)[:, None]).sum(axis=1) - 1  # captions at least as close, minus itself
    n = scores.shape[0]
    out = {}
    for k in ks:
        out[f"R@{k}"] = float(np.mean(rank < k))
        out[f"R@{k}_low"], out[f"R@{k}_high"] = mean_interval(rank < k)
    out.update({f"chance@{k}": k / n for k in ks})
    return out


def clip_signal(encoder, image_paths: list[str], captions: list[str], seed: int = 0) -> dict:
    """Retrieval in a gallery of ``len(image_paths)`` and the CLIP-SIM gap to a one-noun foil.

    ``captions[i]`` is image i's evaluation caption; its foil swaps one shape noun for another
    shape's (:func:`condeval.datasets.miniworld.swap_shape_noun`). The gap is CLIP-SIM(image,
    caption) − CLIP-SIM(image, foil) over the captions that name a shape.
    """
    images = encoder.image_features(image_paths)
    texts = encoder.text_features(captions)
    rng = np.random.default_rng(seed)
    swaps = [swap_shape_noun(c.split(), rng) for c in captions]
    keep = np.array([s is not None for s in swaps])
    foils = encoder.text_features([" ".join(s[0]) for s in swaps if s is not None])
    true_sim = np.sum(images[keep] * texts[keep], axis=1)
    foil_sim = np.sum(images[keep] * foils, axis=1)
    gap = true_sim - foil_sim
    matching = np.sum(images * texts, axis=1)
    return {
        "gallery": len(image_paths),
        **retrieval_at_k(images, texts),
        # CLIPScore is w·max(cos, 0): the share of true pairs it clips to 0, and where their cosines sit
        "matching_cos_mean": float(matching.mean()),
        "matching_cos_le_0": float(np.mean(matching <= 0)),
        "foil_pairs": int(keep.sum()),
        "foil_gap_mean": float(gap.mean()),
        "foil_gap_std": float(gap.std(ddof=1)),
        "foil_true_wins": float(np.mean(gap > 0)),
        **_interval("foil_true_wins", gap > 0),
    }


def shape_naming(encoder, image_paths: list[str], scenes: list[list[dict]], shapes: list[str] | None = None) -> dict:
    """How often CLIP names the shape of a lone object: "a {colour} {noun}" over every shape's noun.

    ``scenes[i]`` are image i's objects (the mini-world's scenes sidecar: dicts with ``shape`` and
    ``colour``). Only images of exactly one object of ``shapes`` count; each is scored against one
    caption per shape of ``shapes`` (default all), its canonical noun with the object's true colour,
    so only the shape decides. A tie with a wrong shape counts as a miss.
    """
    shapes = list(SHAPES) if shapes is None else list(shapes)
    lone = [
        (path, objects[0])
        for path, objects in zip(image_paths, scenes)
        if len(objects) == 1 and objects[0]["shape"] in shapes
    ]
    if not lone:
        raise ValueError(f"no image holds a single object of {shapes}")
    images = encoder.image_features([path for path, _ in lone])
    prompts = [f"a {obj['colour']} {SHAPES[shape][0]}" for _, obj in lone for shape in shapes]
    texts = encoder.text_features(prompts).reshape(len(lone), len(shapes), -1)
    scores = np.einsum("id,isd->is", images, texts)
    truth = np.array([shapes.index(obj["shape"]) for _, obj in lone])
    true_score = scores[np.arange(len(lone)), truth]
    named = (scores >= true_score[:, None]).sum(axis=1) == 1  # only the true shape reaches its score
    return {
        "naming_images": len(lone),
        "naming_shapes": len(shapes),
        "naming_accuracy": float(named.mean()),
        **_interval("naming_accuracy", named),
        "naming_chance": 1 / len(shapes),
    }


def bert_signal(encoder, captions: list[list[str]], seed: int = 0) -> dict:
    """BERT-SIM of two captions of one image against two captions of different images.

    ``captions[i]`` are image i's captions (at least two). Reports both means and the AUC (the
    chance that a same-image pair scores above a different-image pair; 0.5 is no signal).
    """
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(seed)
    first = encoder.text_features([c[0] for c in captions])
    second = encoder.text_features([c[1] for c in captions])
    shuffled = second[rng.permutation(len(captions))]
    same, other = np.sum(first * second, axis=1), np.sum(first * shuffled, axis=1)
    labels = np.r_[np.ones_like(same), np.zeros_like(other)]

    def auc(counts: np.ndarray) -> float:  # image i drawn k times: its same and its other pair, k times each
        return float(roc_auc_score(labels, np.r_[same, other], sample_weight=np.r_[counts, counts]))

    low, high = unit_bootstrap_interval(auc, len(captions), seed)
    return {
        "pairs": len(captions),
        "same_image_mean": float(same.mean()),
        "other_image_mean": float(other.mean()),
        "auc": auc(np.ones(len(captions))),
        "auc_low": low,
        "auc_high": high,
    }


def _interval(key: str, hits: np.ndarray) -> dict[str, float]:
    """``<key>_low`` and ``<key>_high``: the 95% interval over items of the share of ``hits``."""
    low, high = mean_interval(hits)
    return {f"{key}_low": low, f"{key}_high": high}

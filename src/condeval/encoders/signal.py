"""Does an encoder carry signal? Retrieval, foil gaps and caption agreement on held-out images.

A miniature must be measured, not assumed: these figures go to docs/crel.md and a test holds CLIP's
retrieval above a floor, so a broken encoder fails CI.
"""

from __future__ import annotations

import numpy as np

from condeval.datasets.miniworld import swap_shape_noun

__all__ = ["retrieval_at_k", "clip_signal", "bert_signal"]


def retrieval_at_k(image_features: np.ndarray, text_features: np.ndarray, ks=(1, 5)) -> dict[str, float]:
    """Image→text recall@k: row i's own caption (row i of ``text_features``) among the top k of all.

    Features are unit rows; ties count against the true caption.
    """
    scores = image_features @ text_features.T
    rank = (scores >= np.diag(scores)[:, None]).sum(axis=1) - 1  # captions at least as close, minus itself
    n = scores.shape[0]
    out = {f"R@{k}": float(np.mean(rank < k)) for k in ks}
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
    return {
        "gallery": len(image_paths),
        **retrieval_at_k(images, texts),
        "foil_pairs": int(keep.sum()),
        "foil_gap_mean": float(gap.mean()),
        "foil_gap_std": float(gap.std(ddof=1)),
        "foil_true_wins": float(np.mean(gap > 0)),
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
    return {
        "pairs": len(captions),
        "same_image_mean": float(same.mean()),
        "other_image_mean": float(other.mean()),
        "auc": float(roc_auc_score(labels, np.r_[same, other])),
    }

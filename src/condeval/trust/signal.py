"""What the trust track's feature spaces carry: one linear probe per attribute on held-out real features.

The paper's extractors (DINOv3, SigLIP) encode the conditioning attributes linearly; the miniature's
must too, or faithfulness has nothing to measure. :func:`attribute_probes` fits a scikit-learn
logistic regression per attribute on part of the real rows and reports its accuracy on the rest,
beside chance (the share of the test rows' most frequent value).
"""

from __future__ import annotations

import numpy as np

__all__ = ["attribute_probes", "probe_markdown"]


def attribute_probes(features, attributes, names, *, test_share: float = 0.5, seed: int = 0,
                     max_iter: int = 2000) -> dict:  # fmt: skip
    """Per attribute, the held-out accuracy of a linear probe on L2-normalised features.

    Parameters
    ----------
    features : array-like, shape (N, D)
    attributes : array-like of int, shape (N, K)
    names : sequence of str
        The K attribute names.
    test_share : float
        Share of the rows held out to test, stratified by the joint condition where possible.
    seed : int
    max_iter : int
        The logistic regression's iteration cap.

    Returns
    -------
    dict
        ``{name: {"accuracy", "chance", "values", "n_train", "n_test"}}``.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split

    from condeval.metrics import unit_rows

    x = unit_rows(np.asarray(features, dtype=np.float64))
    attributes = np.asarray(attributes)
    if attributes.shape != (len(x), len(names)):
        raise ValueError(f"attributes must be (N, {len(names)}) with N = {len(x)}; got {attributes.shape}")
    _, joint = np.unique(attributes, axis=0, return_inverse=True)
    stratify = joint if np.bincount(joint).min() >= 2 else None
    train, test = train_test_split(np.arange(len(x)), test_size=test_share, random_state=seed, stratify=stratify)
    report = {}
    for k, name in enumerate(names):
        y = attributes[:, k]
        probe = LogisticRegression(max_iter=max_iter).fit(x[train], y[train])
        _, counts = np.unique(y[test], return_counts=True)
        report[name] = {
            "accuracy": float((probe.predict(x[test]) == y[test]).mean()),
            "chance": float(counts.max() / len(test)),
            "values": int(len(np.unique(y))),
            "n_train": int(len(train)),
            "n_test": int(len(test)),
        }
    return report


def probe_markdown(report: dict, dataset: str) -> str:
    """:func:`attribute_probes` of each extractor as a Markdown table: one row per attribute."""
    extractors = list(report)
    names = list(report[extractors[0]])
    lines = [
        f"| {dataset} attribute | values | chance | " + " | ".join(extractors) + " |",
        "|---|---|---|" + "---|" * len(extractors),
    ]
    for name in names:
        first = report[extractors[0]][name]
        cells = " | ".join(f"{report[e][name]['accuracy']:.3f}" for e in extractors)
        lines.append(f"| {name} | {first['values']} | {first['chance']:.3f} | {cells} |")
    return "\n".join(lines) + "\n"

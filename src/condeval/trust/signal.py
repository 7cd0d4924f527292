"""What the trust track's feature spaces carry: one linear probe per attribute on held-out real features.

The paper's extractors (DINOv3, SigLIP) encode the conditioning attributes linearly; the miniature's
must too, or faithfulness has nothing to measure. :func:`attribute_probes` fits a scikit-learn
logistic regression per attribute on part of the real rows and reports its accuracy on the rest,
beside chance (the share of the test rows' most frequent value).
"""

from __future__ import annotations

import numpy as np

from condeval.core.conformal import unit_mean_interval
from condeval.trust.evaluate import with_interval

__all__ = ["attribute_probes", "probe_markdown", "generated_attribute_accuracy", "generated_signal_markdown"]


def attribute_probes(
    features, attributes, names, *, groups=None, test_share: float = 0.5, seed: int = 0, max_iter: int = 2000
) -> dict:
    """Per attribute, the held-out accuracy of a linear probe on L2-normalised features, with its 95%
    interval over the test rows' units.

    Parameters
    ----------
    features : array-like, shape (N, D)
    attributes : array-like of int, shape (N, K)
    names : sequence of str
        The K attribute names.
    groups : array-like, shape (N,), optional
        Each row's exchangeable unit (RxRx1's well), drawn whole by the interval; each row its own
        without.
    test_share : float
        Share of the rows held out to test, stratified by the joint condition where possible.
    seed : int
    max_iter : int
        The logistic regression's iteration cap.

    Returns
    -------
    dict
        ``{name: {"accuracy", "accuracy_low", "accuracy_high", "chance", "values", "n_train", "n_test"}}``.
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
    units = None if groups is None else np.asarray(groups)[test]
    for k, name in enumerate(names):
        y = attributes[:, k]
        probe = LogisticRegression(max_iter=max_iter).fit(x[train], y[train])
        _, counts = np.unique(y[test], return_counts=True)
        correct = probe.predict(x[test]) == y[test]
        low, high = unit_mean_interval(correct, units)
        report[name] = {
            "accuracy": float(correct.mean()),
            "accuracy_low": low,
            "accuracy_high": high,
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
        f"| {dataset} attribute | values | chance | " + " | ".join(f"{e} (95% CI)" for e in extractors) + " |",
        "|---|---|---|" + "---|" * len(extractors),
    ]
    for name in names:
        first = report[extractors[0]][name]
        cells = " | ".join(with_interval(report[e][name], "accuracy", 3) for e in extractors)
        lines.append(f"| {name} | {first['values']} | {first['chance']:.3f} | {cells} |")
    return "\n".join(lines) + "\n"


def generated_attribute_accuracy(
    real_features,
    real_attributes,
    sample_features,
    sample_attributes,
    seen,
    names,
    *,
    seed: int = 0,
    max_iter: int = 2000,
) -> list[dict]:
    """How often a generator draws what was requested, read by linear probes fitted on real features.

    One logistic regression per attribute on every real row (the probe is the instrument, not the
    method under test) reads each sample; its reading is compared with the sample's requested value,
    and, as the baseline, with the request of another sample drawn at random (shuffled requests).

    Parameters
    ----------
    real_features, real_attributes : ndarray
    sample_features, sample_attributes : ndarray
    seen : ndarray of bool, shape (N,)
        Whether each sample's condition is in the training support.
    names : sequence of str
    seed, max_iter : int

    Returns
    -------
    list of dict
        One row per attribute and condition group (``seen``, ``unseen``): ``accuracy`` with its 95%
        interval over the requested conditions, each drawn with all its samples (``accuracy_low``,
        ``accuracy_high``), ``shuffled``, ``n``.
    """
    from sklearn.linear_model import LogisticRegression

    from condeval.metrics import unit_rows

    x_real, x_samples = unit_rows(np.asarray(real_features)), unit_rows(np.asarray(sample_features))
    requested, seen = np.asarray(sample_attributes), np.asarray(seen, dtype=bool)
    shuffled = requested[np.random.default_rng(seed).permutation(len(requested))]
    rows = []
    for k, name in enumerate(names):
        read = LogisticRegression(max_iter=max_iter).fit(x_real, np.asarray(real_attributes)[:, k]).predict(x_samples)
        for group, mask in (("seen", seen), ("unseen", ~seen)):
            if mask.any():
                correct = read[mask] == requested[mask, k]
                _, condition = np.unique(requested[mask], axis=0, return_inverse=True)  # samples of one are one unit
                low, high = unit_mean_interval(correct, condition.reshape(-1))
                rows.append(
                    {
                        "attribute": name,
                        "conditions": group,
                        "n": int(mask.sum()),
                        "accuracy": float(correct.mean()),
                        "accuracy_low": low,
                        "accuracy_high": high,
                        "shuffled": float((read[mask] == shuffled[mask, k]).mean()),
                    }
                )
    return rows


def generated_signal_markdown(signal) -> str:
    """:func:`generated_attribute_accuracy`'s rows of every generator as a Markdown table."""
    lines = [
        "| model | attribute | seen: accuracy (95% CI); shuffled | unseen: accuracy (95% CI); shuffled |",
        "|---|---|---|---|",
    ]
    for (variant, name), part in signal.group_by("variant", "attribute", maintain_order=True):
        cells = []
        for group in ("seen", "unseen"):
            rows = part.filter(part["conditions"] == group).to_dicts()
            cells.append(f"{with_interval(rows[0], 'accuracy', 3)}; {rows[0]['shuffled']:.3f}" if rows else "")
        lines.append(f"| {variant} | {name} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines) + "\n"

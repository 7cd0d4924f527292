"""Config helpers every track shares: canonical params and alpha labels."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ["canonical", "alpha_label", "alpha_labels"]


def canonical(mapping: Mapping) -> dict:
    """A dict with sorted keys, nested dicts too.

    Snakemake's rerun-on-params compares the text of ``params``; sorting makes that text
    independent of the key order a config file happens to have.
    """
    return {
        key: canonical(mapping[key]) if isinstance(mapping[key], Mapping) else mapping[key] for key in sorted(mapping)
    }


def alpha_label(alpha: float) -> str:
    """The text of an alpha in paths and job names (``0.1``, ``0.02``, ``1e-05``)."""
    return f"{alpha:g}"


def alpha_labels(alphas: Iterable[float], key: str) -> list[str]:
    """Labels of a config list of alphas, refusing values whose labels collide.

    Two alphas with one label (0.1 and 0.1000001) would silently become one job.

    Raises
    ------
    ValueError
        Naming ``key`` and the colliding values.
    """
    labels: dict[str, float] = {}
    for alpha in alphas:
        label = alpha_label(alpha)
        if label in labels and labels[label] != alpha:
            raise ValueError(
                f"config key '{key}' holds {labels[label]!r} and {alpha!r}, which name the same job "
                f"(alpha{label}); give alphas that differ in their first 6 significant digits"
            )
        labels[label] = alpha
    return list(labels)

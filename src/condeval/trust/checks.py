"""Input checks the trust track's public functions share: attribute names and rows, flags and scores.

A lab calls :class:`~condeval.trust.score.TrustScorer`, :func:`~condeval.trust.filtering.accepted_mask`,
:func:`~condeval.trust.evaluate.fit_and_score` and :func:`~condeval.trust.samples.write_samples` with
its own arrays; each refuses the same mistakes with the same message, naming the argument.
"""

from __future__ import annotations

import numpy as np

from condeval.core.io import check_finite, integer_array
from condeval.metrics import as_numpy

__all__ = ["RESERVED_NAMES", "attribute_names", "attribute_rows", "flags", "score_values", "same_rows"]

#: Columns the scores and thresholds frames hold beside the attribute columns: an attribute of one of
#: these names would overwrite them (a threshold read from the attribute instead of the trust).
RESERVED_NAMES = ("realism", "faithfulness", "trust", "threshold", "n_real", "coverage")


def attribute_names(names, n_attributes: int | None = None) -> list[str]:
    """``names`` as a list of distinct attribute column names (``n_attributes`` of them, when given).

    Raises
    ------
    TypeError
        ``names`` is one string (it would be read as one name per character) or None.
    ValueError
        A repeated name, a name of :data:`RESERVED_NAMES`, or another count than ``n_attributes``.
    """
    if isinstance(names, str):
        raise TypeError(f"names must be a list of attribute columns, e.g. [{names!r}]; got the string {names!r}")
    if names is None:
        raise TypeError("names must be a list of attribute columns; got None")
    names = list(names)
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"names must be distinct; {repeated} repeat")
    reserved = [name for name in names if name in RESERVED_NAMES]
    if reserved:
        raise ValueError(f"attribute names {reserved} are taken by the scores' own columns {list(RESERVED_NAMES)}")
    if n_attributes is not None and len(names) != n_attributes:
        raise ValueError(f"{len(names)} names for {n_attributes} attributes (names: {names})")
    return names


def attribute_rows(attributes, n_rows: int | None = None, name: str = "attributes") -> np.ndarray:
    """``attributes`` as an integer (N, K) array, N = ``n_rows`` when given.

    Raises
    ------
    ValueError
        Another shape.
    TypeError
        Values that are not integers (:func:`condeval.core.io.integer_array`: a float is refused rather
        than truncated, 0.6 must not become value 0).
    """
    array = as_numpy(attributes)
    if array.ndim != 2 or (n_rows is not None and len(array) != n_rows):
        rows = "N" if n_rows is None else f"N = {n_rows}"
        raise ValueError(
            f"{name} must be (N, K), one row of attribute values per sample, with {rows}; got shape {array.shape}"
        )
    return integer_array(array, name)


def same_rows(n_rows: int, **arrays) -> None:
    """Raise ``ValueError`` naming each of ``arrays`` (name=array) whose length is not ``n_rows``."""
    wrong = {name: len(array) for name, array in arrays.items() if len(array) != n_rows}
    if wrong:
        raise ValueError(f"one row per sample ({n_rows}): {', '.join(f'{k} has {v}' for k, v in wrong.items())}")


def flags(values, n_rows: int | None = None, name: str = "accepted") -> np.ndarray:
    """``values`` as a bool (N,) array: booleans, or integers that are all 0 or 1.

    Raises
    ------
    TypeError
        Other values (0/1 read as row indices would select rows 0 and 1; a text "false" is true).
    ValueError
        Not 1-D, or not ``n_rows`` long.
    """
    array = as_numpy(values)
    if array.dtype != bool:
        if array.dtype.kind not in "iu" or not np.isin(array, (0, 1)).all():
            raise TypeError(f"{name} must be booleans (or 0/1 integers); got dtype {array.dtype}")
        array = array.astype(bool)
    if array.ndim != 1 or (n_rows is not None and len(array) != n_rows):
        raise ValueError(
            f"{name} must be one flag per row (N,){'' if n_rows is None else f' with N = {n_rows}'}; "
            f"got shape {array.shape}"
        )
    return array


def score_values(values, n_rows: int | None = None, name: str = "scores") -> np.ndarray:
    """``values`` as a finite real (N,) array in its own dtype (float32 scores stay float32, so their
    quantiles are those computed before), N = ``n_rows`` when given.

    A NaN score would sit in no quantile (a condition's threshold NaN rejects all its samples) and an
    infinite one set it to accept them all, so both are refused, naming ``name`` and the row.
    """
    array = np.asarray(as_numpy(values))
    if array.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be real numbers; got dtype {array.dtype}")
    if array.ndim != 1:
        raise ValueError(f"{name} must be one score per row (N,); got shape {array.shape}")
    if n_rows is not None and len(array) != n_rows:
        raise ValueError(f"{name} has {len(array)} values for {n_rows} rows")
    return check_finite(array, name)

"""Config helpers every track shares: canonical params, alpha labels, and the config checks that name their key."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import yaml

__all__ = [
    "canonical",
    "alpha_label",
    "alpha_labels",
    "config_errors",
    "duplicate_keys",
    "check_keywords",
    "function_keywords",
]


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
                f"(both print as {label}); give values that differ in their first 6 significant digits"
            )
        labels[label] = alpha
    return list(labels)


def _is_integer(checker, instance) -> bool:
    """JSON Schema's integer, without bools and without floats: YAML's ``2.0`` fails where torch wants 2."""
    return isinstance(instance, int) and not isinstance(instance, bool)


def _is_number(checker, instance) -> bool:
    """JSON Schema's number, without bools and NaN (NaN passes every range comparison)."""
    return isinstance(instance, (int, float)) and not isinstance(instance, bool) and not math.isnan(instance)


def _key(prefix: str, path: Iterable) -> str:
    """A config key as users write it: ``crel.calibration.alphas[2]``."""
    key = prefix
    for part in path:
        key += f"[{part}]" if isinstance(part, int) else (f".{part}" if key else str(part))
    return key or "(the config)"


def _shortened(text: str, limit: int = 240) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _error_lines(error, prefix: str) -> list[str]:
    """One line per config key that ``error`` (a jsonschema ValidationError) is about."""
    key = _key(prefix, error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = error.schema.get("properties", {})
        patterns = error.schema.get("patternProperties", {})
        extras = [k for k in error.instance if k not in known and not any(re.search(p, str(k)) for p in patterns)]
        hint = f" (known: {', '.join(sorted(known))})" if known else ""
        return [f"config key '{_key(prefix, [*error.absolute_path, extra])}': unknown key{hint}" for extra in extras]
    if error.validator == "type" and isinstance(error.instance, float):
        if math.isnan(error.instance):
            return [f"config key '{key}': NaN is not a number here"]
        if error.instance.is_integer() and "integer" in str(error.validator_value):
            return [f"config key '{key}': must be an integer; got {error.instance!r} (write {int(error.instance)})"]
    if error.validator in ("oneOf", "anyOf"):
        if not error.context:
            return [f"config key '{key}': fits more than one of its allowed forms; give only one of them"]
        from jsonschema.exceptions import best_match

        closest = best_match(error.context)
        where = _key(prefix, closest.absolute_path)
        detail = closest.message if where == key else f"{where}: {closest.message}"
        return [f"config key '{key}': fits none of its allowed forms (the closest: {_shortened(detail)})"]
    return [f"config key '{key}': {_shortened(error.message)}"]


def config_errors(instance: object, schema: Mapping, prefix: str = "") -> list[str]:
    """Every way ``instance`` breaks ``schema``, one line per config key, each naming its key.

    The schema's own draft, with two stricter types: an integer is not a float (``2.0``) and a
    number is not NaN.

    Parameters
    ----------
    instance : object
        A config section as loaded from YAML.
    schema : mapping
        Its JSON Schema (local ``$ref`` s resolve against it).
    prefix : str
        The section's key (``crel``), prefixed to every key named.

    Returns
    -------
    list of str
        ``config key 'crel.calibration.alphas[2]': 1.5 is greater than the maximum of 1``, …;
        empty when ``instance`` is valid.
    """
    from jsonschema import validators

    draft = validators.validator_for(schema)
    types = draft.TYPE_CHECKER.redefine_many({"integer": _is_integer, "number": _is_number})
    strict = validators.extend(draft, type_checker=types)
    lines = [line for error in strict(schema).iter_errors(instance) for line in _error_lines(error, prefix)]
    return list(dict.fromkeys(lines))


class _UniqueKeyLoader(yaml.SafeLoader):
    """A YAML loader that refuses a key written twice in one mapping (PyYAML keeps the last silently)."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is written twice (first at line {seen[key] + 1})", key_node.start_mark
                )
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def duplicate_keys(path: str | os.PathLike) -> str | None:
    """Where a YAML (or JSON) config file writes one key twice in a mapping, else None."""
    try:
        with open(path, encoding="utf-8") as handle:
            yaml.load(handle, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.constructor.ConstructorError as error:
        return f"{path}: line {error.problem_mark.line + 1}: {error.problem}"
    except yaml.YAMLError:
        return None  # not YAML at all: Snakemake's own loader says so
    return None


def function_keywords(function: str) -> list[str]:
    """The keyword parameters of ``function`` (``"package.module:name"``: a function, or a dataclass whose
    fields are its keywords), read from its source without importing the module (a config check runs when
    Snakemake parses, before torch or transformers load)."""
    import ast
    import importlib.util

    module, _, name = function.partition(":")
    spec = importlib.util.find_spec(module)
    tree = ast.parse(Path(spec.origin).read_text())
    found = next(node for node in tree.body if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name == name)
    if isinstance(found, ast.ClassDef):
        return [node.target.id for node in found.body if isinstance(node, ast.AnnAssign)]
    return [arg.arg for arg in (*found.args.args, *found.args.kwonlyargs)]


def check_keywords(key: str, given: Mapping, function: str, fixed: Iterable[str] = ()) -> None:
    """Refuse a config mapping (``key``) naming a keyword ``function`` does not take, before any job:
    a misspelt model setting would otherwise reach the function as a raw TypeError hours in.

    Parameters
    ----------
    key : str
        The config key of ``given``, named in the error.
    given : mapping
        The keyword arguments the config passes.
    function : str
        What receives them, as ``"package.module:name"`` (:func:`function_keywords`).
    fixed : iterable of str
        Parameters the workflow passes itself, which the config may not give.
    """
    accepted = sorted(set(function_keywords(function)) - set(fixed))
    unknown = sorted(set(given) - set(accepted))
    if unknown:
        name = function.partition(":")[2]
        raise ValueError(f"config key '{key}' names {unknown}, which {name} does not take (it takes {accepted})")

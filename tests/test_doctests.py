"""Every example in the package's docstrings runs as written and prints what it shows (doctest)."""

import doctest
import importlib
import inspect
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "condeval"
#: The packages whose ``__all__`` is the public API a lab imports from.
PUBLIC_PACKAGES = ("condeval.crel", "condeval.trust", "condeval.crc", "condeval.metrics", "condeval.datasets")
MODULES = sorted(
    # a package's __init__.py is the package itself: imported by its own name, not as a second module copy
    ".".join(("condeval", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")
    for path in PACKAGE.rglob("*.py")
    if ">>> " in path.read_text()
)


def test_the_public_life_cycles_have_examples():
    assert {
        "condeval.crel.estimator",
        "condeval.trust.score",
        "condeval.crc.word_risk",
        "condeval.crc.intervals",
    } <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    results = doctest.testmod(importlib.import_module(name), optionflags=doctest.NORMALIZE_WHITESPACE)
    assert results.failed == 0, f"{name}: {results.failed} of {results.attempted} examples failed"


def _documented_objects() -> dict[str, object]:
    """Every object an API page renders (``::: path`` in docs/api/) or a public package exports."""
    paths = [
        m
        for page in sorted((ROOT / "docs/api").glob("*.md"))
        for m in re.findall(r"^::: (\S+)", page.read_text(), re.M)
    ]
    paths += [f"{package}.{name}" for package in PUBLIC_PACKAGES for name in importlib.import_module(package).__all__]
    objects = {}
    for path in paths:
        module, _, name = path.rpartition(".")
        objects[path] = getattr(importlib.import_module(module), name)
    return objects


def _has_example(obj) -> bool:
    if ">>> " in (inspect.getdoc(obj) or ""):
        return True
    methods = (value for name, value in vars(obj).items() if not name.startswith("_")) if inspect.isclass(obj) else ()
    return any(">>> " in (inspect.getdoc(method) or "") for method in methods)


def test_every_documented_class_and_function_has_an_example():
    objects = _documented_objects()
    callables = {path: obj for path, obj in objects.items() if inspect.isclass(obj) or inspect.isroutine(obj)}
    assert len(callables) > 60  # the API pages and the packages' exports, not an empty walk
    missing = sorted(path for path, obj in callables.items() if not _has_example(obj))
    assert not missing, f"public objects without a docstring example (an Examples section): {missing}"

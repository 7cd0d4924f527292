"""Every example in the package's docstrings runs as written and prints what it shows (doctest)."""

import doctest
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "condeval"
MODULES = sorted(
    ".".join(("condeval", *path.relative_to(PACKAGE).with_suffix("").parts))
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

"""Every report caption of the CReL and shared rules names the package functions that computed its numbers."""

import importlib
import re
from pathlib import Path

import pytest

REPORT = Path(__file__).resolve().parents[2] / "workflow" / "report"
CAPTIONS = sorted([*REPORT.glob("crel/*.rst"), *REPORT.glob("shared/*.rst")])


@pytest.mark.parametrize("caption", CAPTIONS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_caption_names_functions_that_exist(caption):
    sentence = re.search(r"Computed by (.+?)\.\s*$", caption.read_text(), flags=re.S)
    assert sentence, f"{caption}: no 'Computed by ...' sentence at the end"
    names = re.findall(r"``(condeval\.[\w.]+)``", sentence.group(1))
    assert names, f"{caption}: the sentence names no condeval function"
    for name in names:
        module, function = name.rsplit(".", 1)
        assert callable(getattr(importlib.import_module(module), function, None)), (
            f"{caption}: {name} is not a function"
        )

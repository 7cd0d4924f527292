"""Every report caption, of every track, names the package functions that computed its numbers.

Each ``workflow/report/<track>/*.rst`` ends with exactly one "Computed by ``condeval.x.f``, …."
sentence, and every name in it is a callable of the package.
"""

import importlib
import re
from pathlib import Path

import pytest

REPORT = Path(__file__).resolve().parents[2] / "workflow" / "report"
CAPTIONS = sorted(REPORT.glob("*/*.rst"))


def test_captions_found_for_every_track():
    assert {caption.parent.name for caption in CAPTIONS} >= {"crc", "crel", "shared"}


@pytest.mark.parametrize("caption", CAPTIONS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_caption_names_functions_that_exist(caption):
    text = caption.read_text()
    assert text.count("Computed by") == 1, f"{caption}: {text.count('Computed by')} 'Computed by' sentences, not 1"
    sentence = re.search(r"Computed by (.+?)\.\s*$", text, flags=re.S)
    assert sentence, f"{caption}: no 'Computed by ...' sentence at the end"
    names = re.findall(r"``(condeval\.[\w.]+)``", sentence.group(1))
    assert names, f"{caption}: the sentence names no condeval function"
    for name in names:
        module, function = name.rsplit(".", 1)
        assert callable(getattr(importlib.import_module(module), function, None)), (
            f"{caption}: {name} is not a function"
        )

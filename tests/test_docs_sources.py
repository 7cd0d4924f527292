"""docs/workflow.md's catalogue block is config/sources.yaml as it is: its counts and lists are generated."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from condeval.core.fetch import catalogue_table, read_catalog

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("readme_tables", ROOT / "tools" / "readme_tables.py")
readme_tables = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(readme_tables)


def test_the_docs_catalogue_block_is_generated_from_the_current_catalogue():
    text = (ROOT / "docs/workflow.md").read_text()
    block = "\n".join(catalogue_table(read_catalog(ROOT / "config/sources.yaml")))
    filled, names = readme_tables.fill_markers(text, {"sources": block}, ROOT / "docs/workflow.md")
    assert names == {"sources"}, "docs/workflow.md has no sources block"
    assert filled == text, "docs/workflow.md's sources block is stale: python tools/readme_tables.py --write"


def test_the_block_counts_every_source_and_marks_the_gated_and_locked_ones():
    catalog = {
        "sources": {
            "a": {
                "about": "A",
                "hub": [
                    {"repo": "o/a", "revision": None, "gated": True, "to": "x.a"},
                    {"repo": "o/b", "revision": "f" * 40, "to": "x.b"},
                ],
            },
            "b": {"about": "B", "http": [{"url": "http://h/b", "sha256": None, "to": "x.c"}]},
            "c": {"about": "C", "manual": "by hand", "files": ["x.d"], "optional": True},
        }
    }
    lines = catalogue_table(catalog)
    assert lines[0] == (
        "3 sources: 2 hub repositories (1 gated, 1 with a commit in the catalogue), 1 HTTP downloads "
        "(0 with a sha256 in the catalogue), 1 placed by hand."
    )
    assert lines[4:] == [
        "| `a` | hub | A | locked by its first fetch; gated (`HF_TOKEN`) |",
        "| `b` | http | B | locked by its first fetch |",
        "| `c` | manual | C (optional) | placed by hand (the run's message says how) |",
    ]

"""config/README.md is generated from the schemas, is current, and names every key the shipped configs use."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("config_reference", ROOT / "tools" / "config_reference.py")
config_reference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(config_reference)


def test_the_reference_is_generated_from_the_current_schemas():
    assert (ROOT / "config/README.md").read_text() == config_reference.reference(), (
        "config/README.md is stale: python tools/config_reference.py"
    )


def _keys(node, path=""):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _keys(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, list) and node and all(isinstance(item, dict) for item in node):
        for item in node:
            yield from _keys(item, f"{path}[]")
    elif path:
        yield path


@pytest.mark.parametrize("config", ["config.yaml", "paper.yaml", "rehearsal.yaml"])
def test_every_key_of_a_shipped_config_has_a_row(config):
    rows = re.findall(r"^\| `([^`]+)` \| ([^|]*) \|", (ROOT / "config/README.md").read_text(), flags=re.M)
    patterns = [
        re.compile(
            "^"
            + re.escape(key).replace(re.escape("<name>"), r"[^.\[\]]+")
            + (r"(\..+)?$" if "free-form" in kind else "$")
        )
        for key, kind in rows
    ]  # a free-form object's row stands for every key under it
    loaded = yaml.safe_load((ROOT / "config" / config).read_text())
    missing = [key for key in _keys(loaded) if not any(pattern.match(key) for pattern in patterns)]
    assert not missing, f"config/{config} keys without a row in config/README.md: {missing[:10]}"

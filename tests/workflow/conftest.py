"""Helpers of the workflow tests: the tiny test configs, merged as Snakemake merges --configfile."""
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def merge(base: dict, extra: dict) -> dict:
    """``extra`` over ``base``, nested mappings merged key by key (Snakemake's --configfile semantics)."""
    merged = dict(base)
    for key, value in extra.items():
        merged[key] = merge(merged[key], value) if isinstance(value, dict) and isinstance(merged.get(key), dict) else value
    return merged


def tiny_config(*extras: str) -> dict:
    """.test/config/config.yaml with the named .test/config/<extra>.yaml files merged in order."""
    config = yaml.safe_load((REPO / ".test/config/config.yaml").read_text())
    for extra in extras:
        config = merge(config, yaml.safe_load((REPO / f".test/config/{extra}.yaml").read_text()))
    return config

"""The CReL paper's reported numbers, read once from ``paper.yaml`` beside this module.

Every table, figure, report caption and docs table that prints a paper number takes it
from here, so each number is typed in one place.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

import yaml

__all__ = ["paper_numbers", "table1", "table2", "table3", "ablation_table", "table11", "table13_std", "fig8"]

ABLATION_METRICS = ("coverage_r_z", "coverage_z", "coverage_r_y", "coverage_y", "area", "loss")


@cache
def paper_numbers() -> dict:
    """The whole ``paper.yaml`` as a dict (cached; treat as read-only)."""
    return yaml.safe_load(resources.files("condeval.crel").joinpath("paper.yaml").read_text())


def table1() -> dict[tuple[str, float], tuple]:
    """Table 1: ``(method, alpha) -> (coverage_z, coverage_y, area)``, ``None`` where not reported."""
    return {
        (row["method"], round(row["alpha"], 6)): (row["coverage_z"], row["coverage_y"], row["area"])
        for row in paper_numbers()["table1"]
    }


def table2() -> dict[tuple[str, str], dict]:
    """Table 2: ``(model, metric) -> {mean_rho, rank_mean, crel_rho, rank_crel}`` (metric: clip | bert)."""
    return {
        (row["model"], row["metric"]): {k: row[k] for k in ("mean_rho", "rank_mean", "crel_rho", "rank_crel")}
        for row in paper_numbers()["table2"]
    }


def table3() -> dict[tuple[str, str], dict]:
    """Table 3: ``(model, metric) -> {mean_rho, rank_mean, crel_rho, rank_crel}`` (metric: clip | dino)."""
    return {
        (row["model"], row["metric"]): {k: row[k] for k in ("mean_rho", "rank_mean", "crel_rho", "rank_crel")}
        for row in paper_numbers()["table3"]
    }


def ablation_table(table: str) -> dict[tuple[str, float], dict]:
    """An Appendix C table: ``(setting, alpha) -> {metric: value or None}`` for :data:`ABLATION_METRICS`."""
    rows = paper_numbers()["ablations"][table]
    return {
        (str(row["setting"]), round(row["alpha"], 6)): {key: row.get(key) for key in ABLATION_METRICS} for row in rows
    }


def ablation_tables() -> list[str]:
    """Ids of the Appendix C tables the paper reports (keys of ``ablations``)."""
    return list(paper_numbers()["ablations"])


def table11() -> dict:
    """Table 11: epochs, minutes and peak memory of the paper's VAE training run."""
    return dict(paper_numbers()["table11"])


def table13_std() -> float:
    """Table 13: std of CReL-ρ over optimizer seeds."""
    return float(paper_numbers()["table13_std"])


def fig8() -> dict[int, dict[str, float]]:
    """Appendix E.2 / Fig. 8: ``r -> {"crel": s, "grid": s}``."""
    return {row["r"]: {"crel": row["crel"], "grid": row["grid"]} for row in paper_numbers()["fig8"]}

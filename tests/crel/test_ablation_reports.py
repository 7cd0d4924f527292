"""Appendix C tables: our numbers land in the right rows, beside the paper's."""

import math

import numpy as np
import polars as pl
import pytest

from condeval.core.conformal import mean_interval
from condeval.crel.reports.ablations import PAPER_TABLES, ablation_table, num_z0_table, seed_table, table_markdown


def _summary(coverage_y, area, coverage_z=None):
    return {"coverage_y": coverage_y, "area": area, "coverage_z": coverage_z}


def test_beta_table_keeps_every_coverage_and_the_paper_row_of_each_beta():
    rows = [{"setting": "0.1", "alpha": "0.1"}, {"setting": "1e-05", "alpha": "0.1"}]
    table = ablation_table(
        "table4_beta",
        rows,
        [_summary(0.95, 500.0, 0.9), _summary(0.89, 200.0, 0.88)],
        uncalibrated=[{"coverage_r_z": 0.5, "coverage_r_y": 0.7}, {"coverage_r_z": 0.4, "coverage_r_y": 0.6}],
    )
    first = table.row(0, named=True)
    assert (first["coverage_r_z"], first["coverage_z"], first["coverage_r_y"], first["coverage_y"], first["area"]) == (
        0.5,
        0.9,
        0.7,
        0.95,
        500.0,
    )
    assert first["paper_coverage_r_y"] == 0.9200 and first["paper_area"] == 1044.54
    assert table.row(1, named=True)["paper_coverage_y"] == 0.8895
    assert "loss" not in table.columns  # a column nobody reports is dropped


def test_repeated_pcp_runs_are_averaged_with_their_spread():
    rows = [{"setting": "CReL (VAE)", "alpha": "0.1"}] + [{"setting": "PCP", "alpha": "0.1"}] * 3
    summaries = [_summary(0.89, 230.0), _summary(0.90, 300.0), _summary(0.91, 310.0), _summary(0.92, 320.0)]
    table = ablation_table("table9_pcp", rows, summaries)
    pcp = table.filter(pl.col("setting") == "PCP").row(0, named=True)
    assert pcp["runs"] == 3
    assert math.isclose(pcp["coverage_y"], 0.91) and math.isclose(pcp["area"], 310.0)
    assert math.isclose(pcp["area_std_over_runs"], 10.0)
    assert pcp["paper_area"] == 854.24


def test_checkpoint_losses_come_from_the_long_run_history():
    rows = [{"setting": "epoch 5", "alpha": "0.1"}, {"setting": "best", "alpha": "0.1"}]
    run = {"best_val_loss": 0.007, "val_loss_by_epoch": {"5": 0.02, "40": 0.007}}
    table = ablation_table("table10_checkpoints", rows, [_summary(0.85, 280.0), _summary(0.89, 230.0)], training=[run])
    assert table["loss"].to_list() == [0.02, 0.007]
    assert table["paper_loss"].to_list() == [0.0197, 0.0080]


def test_misaligned_inputs_are_refused():
    with pytest.raises(ValueError, match="table8_mae"):
        ablation_table("table8_mae", [{"setting": "0.1", "alpha": "0.1"}], [])


def test_paper_tables_match_the_workflow_settings():
    assert set(PAPER_TABLES["table5_sd_cond"]) == {(f"T={t}", 0.1) for t in (10, 20, 30, 40, 50)}
    assert ("1e-05", 0.1) in PAPER_TABLES["table4_beta"]  # f"{1e-5:g}", as common.smk names the row


def test_markdown_puts_the_paper_in_parentheses():
    table = ablation_table("table8_mae", [{"setting": "0.02", "alpha": "0.02"}], [_summary(0.97, 400.0, 0.975)])
    markdown = table_markdown(table)
    assert "0.9700 (0.9735)" in markdown and "400.0 (407.0)" in markdown


def test_seed_spread_and_curve_tables():
    seeds = seed_table([-0.10, -0.12, -0.11], 50, "mse", 0.1)
    assert math.isclose(seeds["crel_rho_std"].item(), 0.01)
    points = {50: np.array([-0.3, -0.2, -0.1, -0.2]), 1: np.array([-0.1, -0.05, -0.15, -0.1])}
    curve = num_z0_table(points, "mse", 0.1)
    assert curve["num_z0"].to_list() == [1, 50] and curve["crel_rho_mean"].to_list() == pytest.approx([-0.1, -0.2])
    assert curve.select("crel_rho_mean_low", "crel_rho_mean_high").row(1) == pytest.approx(mean_interval(points[50]))


def test_each_row_carries_its_summarys_intervals_and_a_mean_of_runs_none():
    def with_interval(coverage_y, area):
        return _summary(coverage_y, area) | {
            "coverage_y_low": coverage_y - 0.02,
            "coverage_y_high": coverage_y + 0.02,
            "area_low": area - 10,
            "area_high": area + 10,
        }

    rows = [{"setting": "CReL (VAE)", "alpha": "0.1"}] + [{"setting": "PCP", "alpha": "0.1"}] * 2
    table = ablation_table(
        "table9_pcp", rows, [with_interval(0.89, 230.0), with_interval(0.9, 300), with_interval(0.92, 320)]
    )
    markdown = table_markdown(table)
    assert "0.8900 [0.8700–0.9100] (" in markdown and "230.0 [220.0–240.0] (" in markdown
    assert "0.9100 (" in markdown and "310.0 (854.2)" in markdown  # two PCP runs averaged: no interval

"""Appendix C of CReL on the synthetic data: ablation tables beside the paper's numbers.

Each table is long-format: one row per setting (β, T, α, epoch, r, method) with
our coverage of R_Z, C_Z = S^γ, R_Y, C_Y, the area of C_Y (Y-grid points) and,
where the paper reports them, its numbers in ``paper_*`` columns.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from condeval.core.conformal import mean_interval  # noqa: E402
from condeval.core.tables import markdown_table  # noqa: E402
from condeval.crel import paper  # noqa: E402
from condeval.crel.reports.synthetic import TABLE1_ESTIMATES, ours_paper_cell  # noqa: E402

__all__ = [
    "PAPER_TABLES",
    "PAPER_TABLE13_STD",
    "ablation_table",
    "table_markdown",
    "num_z0_table",
    "seed_table",
    "plot_num_z0",
]

METRICS = paper.ABLATION_METRICS


# (setting, alpha) -> paper numbers, from condeval/crel/paper.yaml.
PAPER_TABLES: dict[str, dict[tuple[str, float], dict]] = {t: paper.ablation_table(t) for t in paper.ablation_tables()}
PAPER_TABLE13_STD = paper.table13_std()


def _loss(table: str, setting: str, index: int, training: list[dict]) -> float | None:
    """The LGM's validation loss L at the row's checkpoint (Tables 10 and 12)."""
    if table == "table10_checkpoints":
        run = training[0]
        if setting == "best":
            return run["best_val_loss"]
        return run.get("val_loss_by_epoch", {}).get(setting.removeprefix("epoch "))
    if table == "table12_latent_dim":
        return training[index]["best_val_loss"]
    return None


def _our_row(table: str, index: int, row: dict, summary: dict, uncalibrated: list[dict], training: list[dict]) -> dict:
    extra = uncalibrated[index] if uncalibrated else {}
    return {
        "setting": row["setting"],
        "alpha": float(row["alpha"]),
        "coverage_r_z": extra.get("coverage_r_z"),
        "coverage_z": summary.get("coverage_z"),
        "coverage_r_y": extra.get("coverage_r_y"),
        "coverage_y": summary["coverage_y"],
        "area": summary["area"],
        "loss": _loss(table, row["setting"], index, training),
        **{f"{key}{end}": summary.get(f"{key}{end}") for key in TABLE1_ESTIMATES for end in ("_low", "_high")},
    }


def _average_runs(rows: list[dict]) -> list[dict]:
    """Merge rows sharing a setting (repeated PCP runs): mean of each metric, spread of the area."""
    merged: dict[tuple, list[dict]] = {}
    for row in rows:
        merged.setdefault((row["setting"], row["alpha"]), []).append(row)
    out = []
    for runs in merged.values():
        row = dict(runs[0])
        for key in METRICS:
            values = [r[key] for r in runs if r[key] is not None]
            row[key] = float(np.mean(values)) if values else None
        if len(runs) > 1:  # the runs' own intervals do not make one for their mean
            row |= {f"{key}{end}": None for key in TABLE1_ESTIMATES for end in ("_low", "_high")}
        row["runs"] = len(runs)
        row["area_std_over_runs"] = float(np.std([r["area"] for r in runs], ddof=1)) if len(runs) > 1 else None
        out.append(row)
    return out


def ablation_table(
    table: str,
    rows: list[dict],
    summaries: list[dict],
    uncalibrated: list[dict] | None = None,
    training: list[dict] | None = None,
) -> pl.DataFrame:
    """One Appendix C table with ``paper_*`` columns beside ours.

    Parameters
    ----------
    table : str
        Table id, a key of :data:`PAPER_TABLES`.
    rows : list of dict
        ``setting`` and ``alpha`` of each row, aligned with ``summaries``.
    summaries : list of dict
        Per-row evaluation summaries (``coverage_z``, ``coverage_y``, ``area``).
    uncalibrated : list of dict, optional
        Per-row ``coverage_r_z`` and ``coverage_r_y`` of the uncalibrated region.
    training : list of dict, optional
        LGM training summaries: one per row (Table 12) or the one long run (Table 10).
    """
    if len(rows) != len(summaries):
        raise ValueError(f"{table}: {len(rows)} rows but {len(summaries)} summaries")
    ours = [
        _our_row(table, i, row, s, uncalibrated or [], training or [])
        for i, (row, s) in enumerate(zip(rows, summaries))
    ]
    ours = _average_runs(ours)
    paper = PAPER_TABLES[table]
    for row in ours:
        reported = paper.get((row["setting"], round(row["alpha"], 6)), {})
        row.update({f"paper_{key}": reported.get(key) for key in METRICS})
    schema = {key: pl.Float64 for key in METRICS} | {f"paper_{key}": pl.Float64 for key in METRICS}
    schema |= {f"{key}{end}": pl.Float64 for key in TABLE1_ESTIMATES for end in ("_low", "_high")}
    frame = pl.DataFrame(ours, schema_overrides=schema | {"area_std_over_runs": pl.Float64})
    return frame.select([c for c in frame.columns if frame[c].null_count() < frame.height])


def table_markdown(table: pl.DataFrame) -> str:
    """Markdown: each metric as ``ours [95% interval over test points] (paper)``, as Table 1's cells."""
    metrics = [m for m in METRICS if m in table.columns]
    rows = []
    for row in table.iter_rows(named=True):
        cells = {"setting": row["setting"], "α": f"{row['alpha']:g}"}
        for m in metrics:
            cells[m] = ours_paper_cell(row, m, 1 if m == "area" else 4)
        rows.append(cells)
    return markdown_table(pl.DataFrame(rows))


def num_z0_table(rho_by_num_z0: dict[int, np.ndarray], metric: str, alpha: float) -> pl.DataFrame:
    """Mean CReL-ρ over the test points for each number of starts, with its 95% bootstrap interval over the
    points (``crel_rho_mean_low``, ``crel_rho_mean_high``); ``rho_by_num_z0`` holds each point's CReL-ρ.

    Examples
    --------
    >>> import numpy as np
    >>> curve = num_z0_table({1: np.array([-0.25, -0.5, -0.75]), 50: np.array([-0.5, -0.75, -1.0])}, "mse", 0.1)
    >>> curve.select("num_z0", "crel_rho_mean").rows()
    [(1, -0.5), (50, -0.75)]
    """
    starts = sorted(rho_by_num_z0)
    values = [np.asarray(rho_by_num_z0[k], dtype=float) for k in starts]
    intervals = [mean_interval(rho) for rho in values]
    return pl.DataFrame(
        {
            "num_z0": starts,
            "crel_rho_mean": [float(rho.mean()) for rho in values],
            "crel_rho_mean_low": [low for low, _ in intervals],
            "crel_rho_mean_high": [high for _, high in intervals],
            "metric": metric,
            "alpha": alpha,
        }
    )


def seed_table(means: list[float], num_z0: int, metric: str, alpha: float) -> pl.DataFrame:
    """Spread of the mean CReL-ρ over optimizer seeds, beside the paper's Table 13 std."""
    return pl.DataFrame(
        {
            "metric": [metric],
            "alpha": [alpha],
            "num_z0": [num_z0],
            "runs": [len(means)],
            "crel_rho_mean": [float(np.mean(means))],
            "crel_rho_std": [float(np.std(means, ddof=1))],
            "paper_std": [PAPER_TABLE13_STD],
        }
    )


def plot_num_z0(curve: pl.DataFrame, path) -> None:
    """CReL-ρ against num_z0, as the paper's Figs. 6-7."""
    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    ax.plot(curve["num_z0"], curve["crel_rho_mean"], marker="o")
    ax.set_xscale("log")
    ax.set_xlabel(r"num$_{z_0}$")
    metric = curve["metric"][0].upper()
    ax.set_ylabel(f"CReL-{metric} (mean over test points)")
    ax.set_title(f"Effect of the number of initial points (α={curve['alpha'][0]:g})")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)

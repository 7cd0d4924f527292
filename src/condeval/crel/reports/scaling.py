"""CReL Appendix E, Fig. 8: total calibration time against the latent dimension r.

The table and the figure put the paper's reported times beside ours; grid-scheme times that were
extrapolated from a probe (not run in full, see :func:`condeval.crel.scaling.time_grid_calibration`)
are flagged in the table and drawn hollow on a dashed line.
"""

from __future__ import annotations

import polars as pl
from matplotlib.figure import Figure

from condeval.crel import paper
from condeval.crel.scaling import infeasibility_point

__all__ = ["PAPER_FIG8", "plot_calibration_runtime", "runtime_table"]

#: Appendix E.2 of the paper (RTX A6000): total calibration seconds on 4,000 points, by r.
PAPER_FIG8 = paper.fig8()

_SCHEMA = {
    "latent_dim": pl.Int64,
    "n_cal": pl.Int64,
    "crel_total_s": pl.Float64,
    "crel_encode_s": pl.Float64,
    "crel_offsets_s": pl.Float64,
    "crel_distances_s": pl.Float64,
    "crel_quantile_s": pl.Float64,
    "grid_total_s": pl.Float64,
    "grid_feasible": pl.Boolean,
    "grid_extrapolated": pl.Boolean,
    "grid_reason": pl.String,
    "grid_measured_s": pl.Float64,
    "grid_probe_points": pl.Int64,
    "grid_latent_points_per_region": pl.Int64,
    "grid_output_points": pl.Int64,
    "grid_budget_s": pl.Float64,
    "grid_infeasibility_point": pl.Boolean,
    "speedup": pl.Float64,
    "crel_gamma": pl.Float64,
    "grid_gamma": pl.Float64,
    "paper_crel_s": pl.Float64,
    "paper_grid_s": pl.Float64,
    "paper_speedup": pl.Float64,
}


def runtime_table(results: list[dict]) -> pl.DataFrame:
    """One row per r: our CReL and grid times (with their parts), the paper's beside them.

    Parameters
    ----------
    results : list of dict
        Per-r records with ``latent_dim``, ``crel`` (from :func:`~condeval.crel.scaling.time_crel_calibration`)
        and ``grid`` (:meth:`GridTiming.to_dict <condeval.crel.scaling.GridTiming.to_dict>`).
    """
    first_infeasible = infeasibility_point([res["grid"] for res in results])
    rows = []
    for res in sorted(results, key=lambda res: res["latent_dim"]):
        r, crel, grid = res["latent_dim"], res["crel"], res["grid"]
        paper = PAPER_FIG8.get(r, {})
        rows.append(
            {
                "latent_dim": r,
                "n_cal": crel["n_cal"],
                "crel_total_s": crel["total_s"],
                "crel_encode_s": crel["encode_s"],
                "crel_offsets_s": crel["offsets_s"],
                "crel_distances_s": crel["distances_s"],
                "crel_quantile_s": crel["quantile_s"],
                "grid_total_s": grid["total_s"],
                "grid_feasible": grid["feasible"],
                "grid_extrapolated": not grid["feasible"],
                "grid_reason": grid["reason"],
                "grid_measured_s": grid["measured_s"],
                "grid_probe_points": grid["probe_points"],
                "grid_latent_points_per_region": grid["latent_points_per_region"],
                "grid_output_points": grid["output_grid_points"],
                "grid_budget_s": grid["budget_s"],
                "grid_infeasibility_point": r == first_infeasible,
                "speedup": grid["total_s"] / crel["total_s"],
                "crel_gamma": crel["gamma"],
                "grid_gamma": grid["gamma"],
                "paper_crel_s": paper.get("crel"),
                "paper_grid_s": paper.get("grid"),
                "paper_speedup": paper["grid"] / paper["crel"] if paper else None,
            }
        )
    return pl.DataFrame(rows, schema=_SCHEMA)


def plot_calibration_runtime(table: pl.DataFrame, path) -> None:
    """Fig. 8 analogue: total calibration seconds against r, log scale, paper's times beside ours.

    Measured grid times are filled markers on a solid line, extrapolated ones hollow on a dashed
    line; the first r where the grid scheme is infeasible is marked by a dotted vertical line.

    Parameters
    ----------
    table : DataFrame
        :func:`runtime_table`'s output.
    path : path-like
        File to write; the format follows its suffix (.png, .svg, ...).
    """
    rows = table.sort("latent_dim")
    r = rows["latent_dim"].to_list()
    fig = Figure(figsize=(6.5, 4.5))
    ax = fig.subplots()
    ax.plot(r, rows["crel_total_s"].to_list(), "o-", color="C0", label="CReL (ours, this machine)")
    _plot_grid(ax, rows)
    paper = sorted(PAPER_FIG8.items())
    for key, colour, method in (("crel", "C0", "CReL"), ("grid", "C3", "Feldman grid")):
        dims, seconds = [k for k, _ in paper], [v[key] for _, v in paper]
        ax.plot(dims, seconds, "*", color=colour, ms=11, mfc="none", label=f"{method} (paper, RTX A6000)")
    budget = rows["grid_budget_s"][0]
    ax.axhline(budget, color="0.5", lw=0.8, ls=":", label=f"grid budget per r ({budget:g} s)")
    first = rows.filter(pl.col("grid_infeasibility_point"))["latent_dim"].to_list()
    if first:
        ax.axvline(first[0], color="C3", lw=0.8, ls=":")
        ax.annotate(
            f"grid infeasible from r = {first[0]}",
            (first[0], budget),
            xytext=(4, 6),
            textcoords="offset points",
            fontsize=8,
            color="C3",
        )
    ax.set_yscale("log")
    ax.set_xticks(sorted(set(r) | {k for k, _ in paper}))
    ax.set_xlabel("latent dimension r")
    ax.set_ylabel("total calibration time (s)")
    ax.set_title(f"Fig. 8: calibration time on {rows['n_cal'][0]:,} points (hollow: extrapolated)")
    ax.legend(fontsize=8)
    fig.savefig(path, bbox_inches="tight", dpi=150)


def _plot_grid(ax, rows: pl.DataFrame) -> None:
    """Grid-scheme times: the measured run solid and filled, its extrapolation dashed and hollow."""
    r, seconds, feasible = rows["latent_dim"].to_list(), rows["grid_total_s"].to_list(), rows["grid_feasible"].to_list()
    measured = [(k, s) for k, s, ok in zip(r, seconds, feasible) if ok]
    guessed = [(k, s) for k, s, ok in zip(r, seconds, feasible) if not ok]
    if measured:
        ax.plot(*zip(*measured), "s-", color="C3", label="Feldman grid (ours, measured)")
    if guessed:
        bridge = measured[-1:] if measured and measured[-1][0] < guessed[0][0] else []
        ax.plot(*zip(*(bridge + guessed)), "--", color="C3", lw=1)
        ax.plot(*zip(*guessed), "s", color="C3", mfc="none", label="Feldman grid (ours, extrapolated)")

"""Tables and figures of the CReL synthetic experiments (Section 4.1, Appendix A.1).

Every figure puts the paper's reported numbers beside ours where the paper has them.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from condeval.core.conformal import coverage_bounds, empirical_quantile  # noqa: E402
from condeval.core.tables import markdown_table  # noqa: E402
from condeval.crel import paper  # noqa: E402

__all__ = [
    "PAPER_TABLE1",
    "table1",
    "table1_markdown",
    "ours_paper_cell",
    "TABLE1_ESTIMATES",
    "render_table_png",
    "plot_coverage_vs_alpha",
    "figure_cases",
    "grid_outline",
    "region_panels",
    "plot_regions",
    "plot_vae_vs_cvae",
    "reliability_table",
    "PAPER_TABLE11",
    "lgm_cost_table",
]

METHOD_LABELS = {"crel": "CReL (ours)", "feldman": "Feldman et al.", "dqr": "DQR", "pcp": "PCP"}

# Table 1 and Appendix C.4 (PCP) of the paper (paper.yaml): (method, alpha) -> (coverage Z, coverage Y, area).
PAPER_TABLE1 = paper.table1()
#: Table 1's estimates, each with its 95% interval over test points (:func:`condeval.crel.evaluation.summarize`).
TABLE1_ESTIMATES = ("coverage_z", "coverage_y", "area")


def table1(summaries: list[dict]) -> pl.DataFrame:
    """Table 1 rows (one per method and alpha) with the paper's numbers beside ours."""
    rows = []
    for s in sorted(summaries, key=lambda s: (s["alpha"], list(METHOD_LABELS).index(s["method"]))):
        paper = PAPER_TABLE1.get((s["method"], round(s["alpha"], 6)), (None, None, None))
        rows.append(
            {
                "alpha": s["alpha"],
                "method": s["method"],
                **{f"{key}{end}": s.get(f"{key}{end}") for key in TABLE1_ESTIMATES for end in ("", "_low", "_high")},
                "coverage_y_grid": s.get("coverage_y_grid"),
                "paper_coverage_z": paper[0],
                "paper_coverage_y": paper[1],
                "paper_area": paper[2],
                "n_test_y": s["n_test_y"],
                "detail": _detail(s),
            }
        )
    floats = [f"{key}{end}" for key in TABLE1_ESTIMATES for end in ("", "_low", "_high")]
    floats += [f"paper_{key}" for key in TABLE1_ESTIMATES]
    return pl.DataFrame(rows, schema_overrides=dict.fromkeys(floats, pl.Float64))


def _detail(summary: dict) -> str:
    if summary["method"] == "crel":
        return f"gamma_cal={summary['gamma_cal']:.4g}, gamma_init={summary['gamma_init']:.3f}"
    if summary["method"] == "dqr":
        met = "" if summary["target_met"] else " (target not met)"
        return f"DQR-{summary['quantile_level']:g}{met}"
    if summary["method"] == "feldman":
        return f"radius={summary['radius']:.4g}"
    return f"q={summary['threshold']:.4g}"


def _fmt(value, digits=4) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def ours_paper_cell(row: dict, key: str, digits: int = 4) -> str:
    """A Table 1 cell: our number, its 95% interval over test points in brackets (when the row has one),
    then the paper's number in parentheses."""
    low, high = row.get(f"{key}_low"), row.get(f"{key}_high")
    interval = "" if low is None or high is None else f" [{_fmt(low, digits)}–{_fmt(high, digits)}]"
    return f"{_fmt(row[key], digits)}{interval} ({_fmt(row.get('paper_' + key), digits)})"


def table1_markdown(table: pl.DataFrame) -> str:
    """Markdown rendering: ours, then the paper's number in parentheses."""
    rows = [
        {
            "α": f"{row['alpha']:g}",
            "method": METHOD_LABELS[row["method"]],
            "coverage Z [95%] (paper)": ours_paper_cell(row, "coverage_z"),
            "coverage Y [95%] (paper)": ours_paper_cell(row, "coverage_y"),
            "area in Y, grid points [95%] (paper)": ours_paper_cell(row, "area", 1),
            "detail": row["detail"],
        }
        for row in table.iter_rows(named=True)
    ]
    return markdown_table(pl.DataFrame(rows))


def render_table_png(table: pl.DataFrame, path) -> None:
    """Table 1 as an image, ours beside the paper's numbers."""
    cells = [
        [
            f"{r['alpha']:g}",
            METHOD_LABELS[r["method"]],
            ours_paper_cell(r, "coverage_z"),
            ours_paper_cell(r, "coverage_y"),
            ours_paper_cell(r, "area", 1),
        ]
        for r in table.iter_rows(named=True)
    ]
    fig, ax = plt.subplots(figsize=(14, 0.3 * (len(cells) + 1)))
    ax.axis("off")
    widget = ax.table(
        cellText=cells,
        colLabels=["α", "method", "coverage Z [95%] (paper)", "coverage Y [95%] (paper)", "area in Y [95%] (paper)"],
        bbox=[0, 0, 1, 1],
        cellLoc="center",
    )
    widget.auto_set_font_size(False)
    widget.set_fontsize(9)
    ax.set_title(
        "Table 1: coverage and area on the nonlinear synthetic data (ours [95% interval over test points], paper in parentheses)"
    )
    fig.savefig(path, bbox_inches="tight", dpi=150)
    plt.close(fig)


def plot_coverage_vs_alpha(summaries: list[dict], n_cal: int, path) -> None:
    """Coverage against α per method, the conformal band [1−α, 1−α+1/(n+1)] shaded."""
    alphas = np.array(sorted({s["alpha"] for s in summaries}))
    fig, ax = plt.subplots(figsize=(6, 4.5))
    grid = np.linspace(alphas.min() * 0.8, alphas.max() * 1.05, 200)
    low, high = zip(*(coverage_bounds(n_cal, a) for a in grid))
    ax.fill_between(grid, low, high, color="0.75", label=f"[1−α, 1−α+1/(n_cal+1)], n_cal={n_cal}")
    ax.plot(grid, 1 - grid, color="0.4", lw=0.8, ls="--")
    series = [("crel", "coverage_z", "CReL (Z)")] + [
        (m, "coverage_y", f"{METHOD_LABELS[m]} (Y)") for m in METHOD_LABELS
    ]
    for method, key, label in series:
        points = sorted(
            (s["alpha"], s[key], s["n_test_y" if key == "coverage_y" else "n_test_z"])
            for s in summaries
            if s["method"] == method and s.get(key) is not None
        )
        if not points:
            continue
        a, cov, n = map(np.array, zip(*points))
        se = np.sqrt(cov * (1 - cov) / n)
        ax.errorbar(a, cov, yerr=1.96 * se, marker="o", ms=4, capsize=3, label=label)
    ax.set_xlabel("α (nominal miscoverage)")
    ax.set_ylabel("empirical coverage on the test fold")
    ax.set_title("Coverage against α (bars: 95% Monte-Carlo interval)")
    ax.legend(fontsize=8)
    fig.savefig(path, bbox_inches="tight", dpi=150)
    plt.close(fig)


def _legend(ax) -> None:
    """Legend below the axes, off the data (the clouds fill every corner of a panel), with equal,
    readable marker sizes (scatter sizes differ by orders of magnitude)."""
    legend = ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=3, frameon=False)
    for handle in legend.legend_handles:
        if hasattr(handle, "set_sizes"):
            handle.set_sizes([25])
        handle.set_alpha(1.0)


def figure_cases(test_scores: np.ndarray, gamma_cal: float, n_cases: int) -> list[int]:
    """Test rows that Fig. 2 illustrates: outside R_Z(x) but inside S^γcal(x).

    Falls back to the first rows when fewer such points exist.
    """
    rescued = np.flatnonzero((test_scores > 0) & (test_scores <= gamma_cal))
    chosen = list(rescued[:n_cases])
    return [int(i) for i in chosen] + [i for i in range(len(test_scores)) if i not in chosen][: n_cases - len(chosen)]


def grid_outline(grid, flat: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """A set of cells of a 2-D output grid as ``(axes, boolean image)``, ready for a contour.

    Parameters
    ----------
    grid : condeval.crel.grid.OutputGrid
        The 2-D Y-grid.
    flat : ndarray of int
        Flat indices of the cells in the set (e.g. ``grid.within(...)``).
    """
    mask = np.zeros(grid.size, dtype=bool)
    mask[flat] = True
    return grid.axes(), mask.reshape(grid.points_per_axis, grid.points_per_axis)


def region_panels(before, after, dqr_alone, Z: np.ndarray, Y: np.ndarray, grid, feldman_radius: float) -> list[dict]:
    """The panels of Fig. 2 (:func:`plot_regions`), one per illustrated test point.

    Parameters
    ----------
    before, after, dqr_alone : sequence of condeval.crel.regions.RegionCloud
        Per point: CReL's region before calibration (γ = 0) and after (γ_cal), and the region of
        the DQR alone at its selected level, each from ``CReL.region_clouds``.
    Z, Y : ndarray, shape (n, r) and (n, 2)
        The points' latent codes and outputs.
    grid : condeval.crel.grid.OutputGrid
        The 2-D output grid on which the baselines' sets are drawn.
    feldman_radius : float
        Feldman et al.'s calibrated radius: their set is the decoded region grown by it.

    Returns
    -------
    list of dict
        ``z_before``, ``z_after``, ``y_before``, ``y_after``, ``z_test``, ``y_test`` and the
        outlines ``feldman`` and ``dqr`` (:func:`grid_outline`); a DQR cell counts when the
        region comes within half a grid diagonal, so thin regions still show.
    """
    return [
        {
            "z_before": b.latent,
            "z_after": a.latent,
            "y_before": b.decoded,
            "y_after": a.decoded,
            "z_test": Z[i],
            "y_test": Y[i],
            "feldman": grid_outline(grid, grid.within(b.decoded, b.radii + feldman_radius)),
            "dqr": grid_outline(grid, grid.within(q.decoded, np.maximum(q.radii, grid.half_diagonal))),
        }
        for i, (b, a, q) in enumerate(zip(before, after, dqr_alone, strict=True))
    ]


def _before_after(ax, before, after, point, space: str, after_label: str, axis: str, unit: str) -> None:
    """Scatter a region before (blue) and after (red) calibration, with the test point as a star."""
    ax.scatter(*after.T, s=3, c="tab:red", alpha=0.25, label=f"{after_label} (calibrated)")
    ax.scatter(*before.T, s=3, c="tab:blue", alpha=0.5, label=f"$R_{space}(x)$ (before)")
    ax.scatter(*point, marker="*", s=200, c="tab:green", edgecolor="k", label=f"${space}_{{new}}$")
    ax.set_xlabel(f"${axis}_1${unit}")
    ax.set_ylabel(f"${axis}_2${unit}")


def plot_regions(panels: list[dict], alpha: float, path) -> None:
    """Fig. 2: regions in Z (left) and Y (right) for fixed x, before (R) and after (S^γ, C_Y) calibration.

    Each panel dict holds ``z_before``, ``z_after`` (latent members), ``y_before``, ``y_after``
    (decoded members), ``z_test``, ``y_test``, and optional outlines ``feldman`` and ``dqr``:
    ``(axes, mask)`` pairs of a 2-D Y-grid and the boolean image of the set on it.
    """
    fig, axes = plt.subplots(len(panels), 2, figsize=(10, 4.5 * len(panels)), squeeze=False)
    for row, panel in enumerate(panels):
        az, ay = axes[row]
        _before_after(az, panel["z_before"], panel["z_after"], panel["z_test"], "Z", "$S^{\\gamma_{cal}}(x)$", "z", "")
        az.set_title(f"case {row + 1}: region in $\\mathcal{{Z}}$")
        for key, colour, label in (("feldman", "tab:orange", "Feldman et al."), ("dqr", "tab:purple", "DQR")):
            if key in panel:
                (gx, gy), mask = panel[key]
                ay.contour(gx, gy, mask.T.astype(float), levels=[0.5], colors=colour, linewidths=1.5)
                ay.plot([], [], color=colour, label=label)
        _before_after(ay, panel["y_before"], panel["y_after"], panel["y_test"], "Y", "$C_Y(x)$", "y", " (standardized)")
        ay.set_title(f"case {row + 1}: region in $\\mathcal{{Y}}$")
        _zoom(ay, np.vstack([panel["y_after"], panel["y_test"][None, :]]))
        for ax in (az, ay):
            _legend(ax)
    fig.suptitle(f"Fig. 2: regions for two fixed x (α = {alpha:g})")
    fig.tight_layout()
    fig.savefig(path, bbox_inches="tight", dpi=130)
    plt.close(fig)


def _zoom(ax, points: np.ndarray, margin: float = 0.25) -> None:
    """Limit the axes to ``points`` plus a margin (outlines may extend further)."""
    low, high = points.min(axis=0), points.max(axis=0)
    pad = margin * (high - low)
    ax.set_xlim(low[0] - pad[0], high[0] + pad[0])
    ax.set_ylim(low[1] - pad[1], high[1] + pad[1])


def plot_vae_vs_cvae(panels: dict[str, dict], path) -> None:
    """Fig. 5: encoded codes (left) and reconstructions (right) of samples Y | X = x, per model."""
    fig, axes = plt.subplots(len(panels), 2, figsize=(10, 4.5 * len(panels)), squeeze=False)
    for row, (name, panel) in enumerate(panels.items()):
        az, ay = axes[row]
        az.scatter(*panel["z"].T, s=3, alpha=0.4)
        az.set_xlabel("$z_1$")
        az.set_ylabel("$z_2$")
        az.set_title(f"{name}: $\\{{\\mathcal{{E}}(Y_i^x, x)\\}}$")
        ay.scatter(*panel["y"].T, s=3, alpha=0.3, c="0.6", label="$Y_i^x$ (true samples)")
        ay.scatter(*panel["y_rec"].T, s=3, alpha=0.4, c="tab:red", label="reconstruction")
        ay.set_xlabel("$y_1$ (standardized)")
        ay.set_ylabel("$y_2$ (standardized)")
        ay.set_title(f"{name}: $\\{{Dec(\\mathcal{{E}}(Y_i^x, x))\\}}$")
        _legend(ay)
    fig.suptitle("Fig. 5: reconstruction regions for a fixed x — CVAE vs VAE")
    fig.tight_layout()
    fig.savefig(path, bbox_inches="tight", dpi=130)
    plt.close(fig)


def reliability_table(per_alpha: dict[float, np.ndarray], metric: str) -> pl.DataFrame:
    """Mean, median and 10th percentile of CReL-ρ per α."""
    rows = [
        {
            "alpha": alpha,
            "metric": metric,
            "crel_rho_mean": float(np.mean(v)),
            "crel_rho_median": float(np.median(v)),
            "crel_rho_p10": empirical_quantile(v, 0.1),
            "n_test": int(v.size),
        }
        for alpha, v in sorted(per_alpha.items())
    ]
    return pl.DataFrame(rows)


# Table 11 (Appendix C.6): training cost of the synthetic VAE on an RTX 4090, batch 512.
PAPER_TABLE11 = paper.table11()


def lgm_cost_table(summaries: dict[str, dict]) -> pl.DataFrame:
    """Epochs, wall time and peak memory of each LGM training run, beside the paper's Table 11."""
    rows = []
    for model, s in summaries.items():
        on_gpu = s.get("peak_cuda_mib") is not None
        rows.append(
            {
                "model": model,
                "epochs": s["epochs_run"],
                "best_epoch": s["best_epoch"],
                "best_val_loss": s["best_val_loss"],
                "time_min": s["wall_time_s"] / 60.0,
                "peak_gb": (s["peak_cuda_mib"] if on_gpu else s["peak_rss_mib"]) / 1024.0,
                "peak_memory": "GPU allocated" if on_gpu else "process RSS (CPU)",
                "paper_epochs": PAPER_TABLE11["epochs"] if model == "vae" else None,
                "paper_time_min": PAPER_TABLE11["time_min"] if model == "vae" else None,
                "paper_peak_gb": PAPER_TABLE11["peak_gb"] if model == "vae" else None,
            }
        )
    return pl.DataFrame(rows)

"""Table 2, Figs. 3, 4 and 6 and the reliability cards of the image-to-text track (Section 4.2).

Where the models carry the paper's names (the paper config), the paper's numbers stand beside ours.
"""

from __future__ import annotations

import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
from PIL import Image  # noqa: E402

from condeval.core.tables import markdown_table  # noqa: E402
from condeval.crel import paper  # noqa: E402

__all__ = [
    "METRIC_LABELS",
    "table2_markdown",
    "temperature_markdown",
    "plot_violins",
    "plot_num_z0",
    "example_images",
    "plot_examples",
    "plot_card",
]

METRIC_LABELS = {"clip": "CLIP-SIM", "bert": "BERT-SIM", "dino": "DINO-SIM"}
PAPER_TABLE2 = paper.table2()
_OURS, _WORSE, _BETTER = "#1f77b4", "#d62728", "#2ca02c"


def _paper_cell(published: dict, model: str, metric: str, value: str, rank: str) -> str:
    row = published.get((model, metric))
    return "" if row is None else f"{row[value]:.4f}^{row[rank]}"


def table2_markdown(table: pl.DataFrame, published: dict | None = None) -> str:
    """Table 2 (or 3) as Markdown: per metric and model, mean ρ and CReL-ρ with ranks as superscripts, Δ.

    ``published``: the paper's rows by (model, metric) (default Table 2's), shown beside ours when
    every model carries a paper name.
    """
    published = PAPER_TABLE2 if published is None else published
    rows = []
    with_paper = all((r["model"], r["metric"]) in published for r in table.iter_rows(named=True))
    for r in table.iter_rows(named=True):
        row = {
            "metric": METRIC_LABELS[r["metric"]],
            "model": r["model"],
            "ρ (mean)": f"{r['mean_rho']:.4f}^{r['rank_mean']}",
            "ρ 95% CI": _interval_cell(r, "mean_rho"),
            **_own_code_cells(r),
            "CReL-ρ": f"{r['crel_rho']:.4f}^{r['rank_crel']}",
            "CReL-ρ 95% CI": _interval_cell(r, "crel_rho"),
            "Δ": f"{r['delta']:+.4f}",
            **_worst_case_cells(r),
            "rank change": _rank_change(r["rank_mean"], r["rank_crel"], r.get("rank_change_resolved", True)),
            "test images": r["n_test"],
        }
        if with_paper:
            row["paper ρ"] = _paper_cell(published, r["model"], r["metric"], "mean_rho", "rank_mean")
            row["paper CReL-ρ"] = _paper_cell(published, r["model"], r["metric"], "crel_rho", "rank_crel")
        rows.append(row)
    return markdown_table(pl.DataFrame(rows))


def _own_code_cells(r: dict) -> dict[str, str]:
    """ρ at the items' own decoded codes, where the scores hold it."""
    return {"ρ at own code": f"{r['rho_own_code']:.4f}"} if "rho_own_code" in r else {}


def _worst_case_cells(r: dict) -> dict[str, str]:
    """Δ split at the own code, the converged share and the manifold check, where the scores hold them."""
    cells = {}
    if "reconstruction" in r:
        cells["Δ reconstruction"] = f"{r['reconstruction']:+.4f}"
        cells["Δ worst case"] = f"{r['worst_case']:+.4f}"
    if "converged" in r:
        cells["converged"] = f"{r['converged']:.3f}"
    if "worst_nn_distance" in r:
        cells["nearest real caption: worst / sampled / real"] = (
            f"{r['worst_nn_distance']:.3f} / {r['caption_nn_distance']:.3f} / {r['reference_nn_distance']:.3f}"
        )
    return cells


def temperature_markdown(table: pl.DataFrame) -> str:
    """The temperature ablation as Markdown: per metric and temperature, ρ, ρ at own code, CReL-ρ and Δ.

    ``table``: :func:`condeval.crel.image_to_text.table2` rows with a ``temperature`` column.
    """
    rows = [
        {
            "metric": METRIC_LABELS[r["metric"]],
            "temperature": f"{r['temperature']:g}",
            "ρ (mean)": f"{r['mean_rho']:.4f}",
            **_own_code_cells(r),
            "CReL-ρ": f"{r['crel_rho']:.4f}",
            "Δ": f"{r['delta']:+.4f}",
            **_worst_case_cells(r),
            "test images": r["n_test"],
        }
        for r in table.sort("metric", "temperature").iter_rows(named=True)
    ]
    return markdown_table(pl.DataFrame(rows))


def _rank_change(before: int, after: int, resolved: bool = True) -> str:
    """The rank's move from ρ to CReL-ρ; one that no paired interval resolves is named as noise."""
    if after == before:
        return "="
    if not resolved:
        return f"{before}→{after} (within noise)"
    return f"{before}→{after} ({'up' if after < before else 'down'})"


def _interval_cell(r: dict, column: str) -> str:
    """``[low, high]`` of a mean's 95% bootstrap interval over the items ("—" where there is none)."""
    low, high = r.get(f"{column}_low"), r.get(f"{column}_high")
    return "—" if low is None or np.isnan(low) else f"[{low:.4f}, {high:.4f}]"


def _violin_panel(ax, scores: pl.DataFrame, table: pl.DataFrame, metric: str, models: list[str], panel: int) -> None:
    data = [scores.filter((pl.col("metric") == metric) & (pl.col("model") == m))["rho"].to_numpy() for m in models]
    parts = ax.violinplot(data, showmedians=True, showextrema=True)
    for body in parts["bodies"]:
        body.set_alpha(0.45)
    for k, model in enumerate(models, start=1):
        row = table.filter((pl.col("metric") == metric) & (pl.col("model") == model)).row(0, named=True)
        ax.scatter([k], [row["mean_rho"]], marker="o", color="black", zorder=3, label="mean ρ" if k == 1 else None)
        ax.scatter([k], [row["crel_rho"]], marker="v", color=_WORSE, zorder=3, label="CReL-ρ" if k == 1 else None)
    ax.set_xticks(range(1, len(models) + 1), models, rotation=20)
    ax.set_ylabel(f"ρ = {METRIC_LABELS[metric]}")
    ax.set_title(f"({'ab'[panel]}) {METRIC_LABELS[metric]} distributions")


def plot_violins(scores: pl.DataFrame, table: pl.DataFrame, path) -> None:
    """Fig. 3 (Fig. 11 for text-to-image): violins of ρ on the test images, per model and metric, with
    mean ρ and CReL-ρ marked."""
    models = sorted(scores["model"].unique().to_list())
    metrics = [m for m in METRIC_LABELS if m in scores["metric"].unique().to_list()]
    fig, axes = plt.subplots(1, len(metrics), figsize=(5.5 * len(metrics), 4), squeeze=False)
    for panel, (ax, metric) in enumerate(zip(axes[0], metrics)):
        _violin_panel(ax, scores, table, metric, models, panel)
    axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


def plot_num_z0(curve: pl.DataFrame, path, num_z0: int | dict | None = None) -> None:
    """Fig. 6 (Fig. 7 for text-to-image): mean CReL-ρ against the number of PGD starting points, per
    model and metric.

    Error bars are one standard error over the test items (where ``curve`` has ``se``); a dotted
    line marks the table's ``num_z0`` (one number, or one per metric), where the curve should be
    flat within them.
    """
    metrics = [m for m in METRIC_LABELS if m in curve["metric"].unique().to_list()]
    fig, axes = plt.subplots(1, len(metrics), figsize=(5.5 * len(metrics), 3.8), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        for model in sorted(curve["model"].unique().to_list()):
            part = curve.filter((pl.col("metric") == metric) & (pl.col("model") == model)).sort("num_z0")
            se = part["se"] if "se" in part.columns else None
            ax.errorbar(part["num_z0"], part["crel_rho"], yerr=se, marker="o", capsize=2, label=model)
        marked = num_z0.get(metric) if isinstance(num_z0, dict) else num_z0
        if marked is not None:
            ax.axvline(marked, color="grey", linestyle=":", linewidth=1)
        ax.set_xscale("log")
        ax.set_xlabel(r"num$_{z_0}$")
        ax.set_ylabel(f"CReL-{METRIC_LABELS[metric]}")
        ax.set_title(f"Effect of the number of initial points ({METRIC_LABELS[metric]})")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


def example_images(scores: pl.DataFrame, metric: str, n: int) -> list[int]:
    """Test images where ranking the models by ρ and by CReL-ρ disagrees most (ties: smaller id first)."""
    part = scores.filter(pl.col("metric") == metric).with_columns(
        pl.col("rho").rank("min", descending=True).over("image_id").alias("rank_rho"),
        pl.col("crel_rho").rank("min", descending=True).over("image_id").alias("rank_crel"),
    )
    disagreement = part.group_by("image_id").agg((pl.col("rank_rho") - pl.col("rank_crel")).abs().sum().alias("moves"))
    return disagreement.sort(["moves", "image_id"], descending=[True, False]).head(n)["image_id"].to_list()


def plot_examples(examples: list[dict], alpha: float, path) -> None:
    """Fig. 4: per example image, each model's caption and the real caption nearest its worst case.

    ``examples``: dicts with ``metric``, ``image_path``, ``reference`` (the evaluation caption) and
    ``models``: a list of dicts with ``model``, ``caption``, ``rho``, ``rank_rho``, ``worst_caption``,
    ``crel_rho``, ``rank_crel``.
    """
    fig, axes = plt.subplots(
        len(examples), 2, figsize=(13, 2.7 * len(examples)), gridspec_kw={"width_ratios": [1, 5]}, squeeze=False
    )
    for (image_ax, text_ax), example in zip(axes, examples):
        image_ax.imshow(Image.open(example["image_path"]).convert("RGB"))
        image_ax.axis("off")
        image_ax.set_title(f"CReL-{METRIC_LABELS[example['metric']]}", fontsize=9)
        lines = [f"ground truth: {example['reference']}", ""]
        for m in example["models"]:
            lines.append(f'{m["model"]}: "{m["caption"]}"  ρ={m["rho"]:.3f}^{m["rank_rho"]}')
            lines.append(f'    worst case ≈ "{m["worst_caption"]}"  CReL-ρ={m["crel_rho"]:.3f}^{m["rank_crel"]}')
        text_ax.text(
            0, 1, "\n".join(textwrap.shorten(line, 140) for line in lines), va="top", family="monospace", fontsize=7.5
        )
        text_ax.axis("off")
    fig.suptitle(
        f"Qualitative results of image-to-text models (α = {alpha:g}); superscripts: rank among the models on this image"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


def plot_card(model: str, table: pl.DataFrame, scores: pl.DataFrame, alpha: float, path) -> None:
    """A model's reliability card: per metric its mean ρ, CReL-ρ, rank change (highlighted) and violin."""
    metrics = [m for m in METRIC_LABELS if m in table["metric"].unique().to_list()]
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.6), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        row = table.filter((pl.col("metric") == metric) & (pl.col("model") == model)).row(0, named=True)
        values = scores.filter((pl.col("metric") == metric) & (pl.col("model") == model))["rho"].to_numpy()
        ax.violinplot([values], vert=False, showmedians=True)
        ax.axvline(row["mean_rho"], color="black", label=f"mean ρ {row['mean_rho']:.4f} (rank {row['rank_mean']})")
        ax.axvline(
            row["crel_rho"],
            color=_WORSE,
            linestyle="--",
            label=f"CReL-ρ {row['crel_rho']:.4f} (rank {row['rank_crel']})",
        )
        moved = row["rank_crel"] != row["rank_mean"]
        colour = (_BETTER if row["rank_crel"] < row["rank_mean"] else _WORSE) if moved else "black"
        change = _rank_change(row["rank_mean"], row["rank_crel"]) if moved else f"{row['rank_crel']} (unchanged)"
        ax.set_title(f"{METRIC_LABELS[metric]}: rank {change}", color=colour, fontweight="bold" if moved else None)
        ax.set_yticks([])
        ax.set_xlabel(f"ρ = {METRIC_LABELS[metric]} on {len(values)} test images")
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle(f"Reliability card: {model} (α = {alpha:g})")
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)

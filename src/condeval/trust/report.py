"""The trust track's figures, with the paper's axes: the deciles (Figs. 2, 8 and 9) and the graded
shift (Fig. 7)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from condeval.core.conformal import mean_interval  # noqa: E402
from condeval.trust.evaluate import with_interval  # noqa: E402
from condeval.trust.filtering import UNDEFINED_GAIN  # noqa: E402

__all__ = [
    "plot_deciles",
    "plot_graded_shift",
    "plot_morphology_deciles",
    "morphology_markdown",
    "during_generation_markdown",
    "plot_during_generation",
    "feature_tables_markdown",
]

# each score's axis name and what its first decile holds
_SCORE_LABELS = {
    "trust": ("trust", "most trusted"),
    "realism": ("realism", "most realistic"),
    "faithfulness": ("faithfulness", "most faithful"),
}


# one colour per generator in every figure, whichever generators a figure holds
_GENERATOR_COLOURS = {"vanilla": "C0", "repa-dinov3": "C1", "repa-siglip": "C2"}


def variant_colours(variants) -> dict:
    """Each generator's colour: the three of the paper fixed, any other from C3 on, in the order given."""
    others = [v for v in variants if v not in _GENERATOR_COLOURS]
    return {v: _GENERATOR_COLOURS.get(v) or f"C{3 + others.index(v) % 7}" for v in variants}


def plot_deciles(rankings: pl.DataFrame, path, title: str) -> None:
    """KID, z-KID and held-out real classifier accuracy per decile of each ranked score, one line per
    generator (``variant`` column) in its 95% band over conditions where the table has one: Fig. 2
    (trust), Fig. 8 (realism, faithfulness), Fig. 9 (RxRx1)."""
    scores = [s for s in _SCORE_LABELS if s in rankings["score"].unique().to_list()]
    metrics = (("kid", "KID"), ("z_kid", "z-KID (real–real null)"), ("accuracy", "classifier accuracy on real"))
    fig, axes = plt.subplots(
        len(metrics), len(scores), figsize=(4.2 * len(scores), 3.0 * len(metrics)), squeeze=False, sharex=True
    )
    for col, score in enumerate(scores):
        colours = variant_colours(sorted(rankings["variant"].unique().to_list()))
        for variant, colour in colours.items():
            part = rankings.filter((pl.col("score") == score) & (pl.col("variant") == variant)).sort("bin")
            decile = part["bin"].to_numpy() + 1
            for row, (metric, label) in enumerate(metrics):
                axes[row][col].plot(decile, part[metric].to_numpy(), marker="o", label=variant, color=colour)
                if f"{metric}_low" in part.columns:  # the 95% interval over conditions
                    low, high = (part[f"{metric}{end}"].to_numpy() for end in ("_low", "_high"))
                    axes[row][col].fill_between(decile, low, high, color=colour, alpha=0.15, linewidth=0)
                axes[row][col].set_ylabel(label)
        axes[0][col].set_title(f"ranked by {_SCORE_LABELS[score][0]}")
        axes[-1][col].set_xlabel("{} decile (1 = {})".format(*_SCORE_LABELS[score]))
        axes[-1][col].set_xticks(np.arange(1, int(rankings["bin"].max()) + 2))
    axes[0][-1].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


def plot_graded_shift(shift: pl.DataFrame, path, title: str) -> None:
    """Fig. 7: per-condition mean trust and KID against the minimum Hamming distance to the training
    support, one colour per generator, the means per distance joined."""
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    for variant, colour in variant_colours(sorted(shift["variant"].unique().to_list())).items():
        part = shift.filter(pl.col("variant") == variant)
        means = part.group_by("hamming").agg(pl.col("mean_trust", "kid_all").mean()).sort("hamming")
        for ax, column in zip(axes, ("mean_trust", "kid_all"), strict=True):
            jitter = np.random.default_rng(0).uniform(-0.08, 0.08, part.height)
            ax.scatter(part["hamming"].to_numpy() + jitter, part[column].to_numpy(), s=14, alpha=0.6, color=colour)
            ax.plot(means["hamming"].to_numpy(), means[column].to_numpy(), color=colour, label=variant)
    axes[0].set_ylabel("mean trust (lower is better)")
    axes[1].set_ylabel("KID")
    for ax in axes:
        ax.set_xlabel("minimum Hamming distance to the training support")
        ax.set_xticks(sorted(shift["hamming"].unique().to_list()))
    axes[1].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


def deciles_markdown(rankings: pl.DataFrame) -> str:
    """The numbers behind Figs. 2, 8 and 9: per generator and ranked score, KID, z-KID and the real-test
    classifier's accuracy in each decile (1 = the most trusted, realistic or faithful) with its 95%
    interval over conditions where the table has one, one row per (generator, score, metric) with the ten
    deciles as columns, and last the change from the first decile to the last with its interval
    (:func:`~condeval.trust.deciles.decile_kid`, :func:`~condeval.trust.deciles.decile_classifier`).

    Examples
    --------
    >>> import polars as pl
    >>> rankings = pl.DataFrame({"variant": ["v", "v"], "score": ["trust", "trust"], "bin": [0, 1],
    ...                          "kid": [1.0, 2.0], "z_kid": [3.0, 4.0], "accuracy": [0.5, 0.25],
    ...                          "kid_low": [0.5, 1.5], "kid_high": [1.5, 2.5],
    ...                          "kid_change": [0.0, 1.0], "kid_change_low": [0.0, 0.2], "kid_change_high": [0.0, 1.8]})
    >>> print(deciles_markdown(rankings).splitlines()[2])
    | v | trust | KID | 1.00 (0.50, 1.50) | 2.00 (1.50, 2.50) | 1.00 (0.20, 1.80) |
    """
    bins = sorted(rankings["bin"].unique().to_list())
    lines = [
        "| model | ranked by | metric | "
        + " | ".join(f"decile {b + 1}" for b in bins)
        + f" | decile {len(bins)} − decile 1 (95% CI) |",
        "|---|---|---|" + "---|" * (len(bins) + 1),
    ]
    metrics = (("kid", "KID", 2), ("z_kid", "z-KID", 1), ("accuracy", "accuracy", 2))
    scores = [s for s in _SCORE_LABELS if s in rankings["score"].unique().to_list()]
    for variant in sorted(rankings["variant"].unique().to_list()):
        for score in scores:
            part = rankings.filter((pl.col("variant") == variant) & (pl.col("score") == score)).sort("bin")
            values = dict(zip(part["bin"].to_list(), part.iter_rows(named=True), strict=True))
            for column, label, digits in metrics:
                cells = [with_interval(values.get(b, {}), column, digits) for b in bins]
                cells.append(with_interval(values.get(bins[-1], {}) if bins else {}, f"{column}_change", digits))
                lines.append(f"| {variant} | {score} | {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def graded_shift_markdown(shift: pl.DataFrame) -> str:
    """The numbers behind Fig. 7: per generator and minimum Hamming distance to the training support, the
    conditions at that distance and their means of mean trust and of KID (all samples), each with its 95%
    interval over those conditions (none below two).

    Examples
    --------
    >>> import polars as pl
    >>> shift = pl.DataFrame({"variant": ["v", "v", "v"], "hamming": [0, 1, 1],
    ...                       "mean_trust": [1.0, 2.0, 4.0], "kid_all": [0.5, 1.0, 2.0]})
    >>> print(graded_shift_markdown(shift).splitlines()[3])
    | v | 1 | 2 | 3.00 (2.00, 4.00) | 1.50 (1.00, 2.00) |
    """
    lines = [
        "| model | Hamming distance | conditions | mean trust (95% CI) | KID (95% CI) |",
        "|---|---|---|---|---|",
    ]
    for (variant, hamming), part in sorted(shift.group_by("variant", "hamming"), key=lambda group: group[0]):
        row = {}
        for column in ("mean_trust", "kid_all"):
            values = part[column].to_numpy()
            row[column] = float(values.mean())
            row[f"{column}_low"], row[f"{column}_high"] = mean_interval(values)
        cells = " | ".join(with_interval(row, column, 2) for column in ("mean_trust", "kid_all"))
        lines.append(f"| {variant} | {hamming} | {part.height} | {cells} |")
    return "\n".join(lines) + "\n"


def plot_morphology_deciles(deciles: pl.DataFrame, path, title: str) -> None:
    """Fig. 3: accuracy on real sites of classifiers trained on each trust bin's generated sites
    in CellProfiler space, cell type (4 classes) and condition, one line per generator (``variant``)."""
    targets = sorted(deciles["target"].unique().to_list())
    if deciles.is_empty():  # no generated site measured (e.g. no cells found in any): an empty figure saying so
        fig, ax = plt.subplots(figsize=(4.4, 3.4))
        ax.text(0.5, 0.5, "no generated site measured by CellProfiler", ha="center", va="center")
        ax.set_axis_off()
        fig.suptitle(title)
        fig.savefig(path, dpi=150)
        plt.close(fig)
        return
    n_bins = int(deciles["bin"].max()) + 1
    bin_name = "trust decile" if n_bins == 10 else f"trust bin, of {n_bins}"
    fig, axes = plt.subplots(1, len(targets), figsize=(4.4 * len(targets), 3.4), squeeze=False)
    for ax, target in zip(axes[0], targets, strict=True):
        for variant, colour in variant_colours(sorted(deciles["variant"].unique().to_list())).items():
            part = deciles.filter((pl.col("target") == target) & (pl.col("variant") == variant)).sort("bin")
            ax.errorbar(
                part["bin"].to_numpy() + 1,
                part["accuracy"].to_numpy(),
                yerr=part["accuracy_sd"].to_numpy(),
                marker="o",
                capsize=2,
                label=variant,
                color=colour,
            )
        ax.set_title(f"{target} classifier on CellProfiler features")
        ax.set_xlabel(f"{bin_name} (1 = most trusted)")
        ax.set_ylabel("accuracy on real sites")
        ax.set_xticks(np.arange(1, n_bins + 1))
    axes[0][-1].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


def morphology_markdown(
    contrast: pl.DataFrame, counts: dict, segmentation: dict | None, variants: Sequence[str] = ()
) -> str:
    """The Section 5.1.3 table (one row per generator and arm) with the feature and segmentation counts;
    the arms of ``variants`` without a row (no accepted sample measured) are named under it."""
    lines = [
        "| model | arm | accepted | Accept% (95% CI) | z (trust) (95% CI) | z (random) (95% CI) | Δz (95% CI) | removed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    rows = list(contrast.iter_rows(named=True)) if "arm" in contrast.columns else []
    for row in rows:
        lines.append(
            f"| {row['variant']} | {row['arm']} | {row['n_accepted']} | {with_interval(row, 'accept_pct', 1)} | "
            f"{with_interval(row, 'z_trust', 3)} | {with_interval(row, 'z_random', 3)} | "
            f"{row['delta']:+.3f} ({row['ci_low']:+.3f}, {row['ci_high']:+.3f}) | "
            + f"{row['removed_pct']:+.0f}% |".replace("-0%", "+0%")
        )
    present = {(row["variant"], row["arm"]) for row in rows}
    missing = [f"{v} {arm}" for v in variants for arm in ("seen", "unseen") if (v, arm) not in present]
    if missing:
        lines += ["", f"No row (no accepted sample among the measured ones): {', '.join(missing)}."]
    lines += [
        "",
        f"Features: {counts['numeric']} numeric columns, {counts['variance']} after the variance threshold, "
        f"**{counts['outlier']} kept** after the real-data outlier filter (paper: 2,467 → 621); "
        f"{counts['unfiltered']} in the unfiltered set (paper: 2,415). Real sites {counts['real_rows']}; "
        + _centroid_sentence(counts),
    ]
    if segmentation:
        lines += [
            "",
            f"Segmentation on the miniature's {segmentation['sites']} real sites: "
            f"{segmentation['counted']:.2f} nuclei counted per site against {segmentation['drawn']:.2f} drawn; "
            f"the count exact on {100 * segmentation['exact']:.0f}% of sites, mean absolute error "
            f"{segmentation['mae']:.2f}, Pearson r {segmentation['r']:.3f}.",
        ]
    return "\n".join(lines) + "\n"


def _centroid_sentence(counts: dict) -> str:
    if not counts.get("centroid_top_k"):
        return f"the centroid distance over all {len(counts['centroid_features'])} kept features (the paper's)."
    return (
        f"the centroid distance over the top {len(counts['centroid_features'])} features by ANOVA F after the "
        "|r| > 0.7 prune (the official code's option): "
        + ", ".join(f"`{c}`" for c in counts["centroid_features"])
        + "."
    )


PATH_NAMES = {"translator": "translator", "aligned": "REPA aligned_mean", "post": "post generation"}


def during_generation_markdown(steps: pl.DataFrame, signals: dict) -> str:
    """Appendix L.2: per generator, path and scoring step, KID of the trust-selected and random subsets,
    the gain, Accept% and the denoising steps saved, the post-generation row last; Appendix L.1's
    support-shift table at the last scoring step (translator and REPA-aligned paths, with the per-sample
    agreement of realism, faithfulness and trust with post generation); and the translators' check
    (translated held-out real features scored against their true SigLIP features)."""
    lines = [
        "| model | path | scoring at step | KID (trust) (95% CI) | KID (random) (95% CI) | gain %, the official "
        "code's (95% CI) | gain %, ratio of mean KIDs (95% CI) | Accept% (95% CI) | steps saved |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in steps.iter_rows(named=True):
        where = "post generation" if row["scoring"] == "post" else f"{row['step']} ({row['steps_run_pct']:.0f}%)"
        head = f"| {row['variant']} | {PATH_NAMES[row['path']]} | {where} |"
        accept = with_interval(row, "accept", 1, "–")
        if row.get("kid_trust") is None:
            lines.append(f"{head} – | – | – (no condition kept) | – | {accept} | – |")
            continue
        lines.append(f"{head} {_kids(row)} | {_gains(row)} | {accept} | {row['steps_saved_pct']:.1f}% |")
    lines += ["", support_shift_markdown(steps)]
    for variant, signal in signals.items():
        by_t = ", ".join(f"t = {s['t']:g}: ρ {s['spearman']:.2f}" for s in signal["by_t"])
        lines += [
            "",
            f"{variant}'s translator ({signal['pairs']} pairs): on {signal['held_out_images']} real images "
            f"outside the support, the trust of translated features against that of their true SigLIP "
            f"features, Spearman {by_t}.",
        ]
    return "\n".join(lines) + "\n"


def support_shift_markdown(steps: pl.DataFrame) -> str:
    """Appendix L.1: each generator and path at the last scoring step: Accept%, KID of the trust-selected and
    random subsets, the gain, and the per-sample Spearman of realism (R), faithfulness (F) and trust
    against post generation."""
    during = steps.filter(pl.col("scoring") == "during")
    if during.height == 0:
        return ""
    last = during["step"].max()
    lines = [
        f"Support-shift table (Appendix L.1), scored at step {last}:",
        "",
        "| path | model | Accept% (95% CI) | KID (trust) (95% CI) | KID (random) (95% CI) | gain %, the official "
        "code's (95% CI) | gain %, ratio of mean KIDs (95% CI) | ρ R | ρ F | ρ trust |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in during.filter(pl.col("step") == last).sort("path", "variant").iter_rows(named=True):
        rho = " | ".join(f"{row.get(f'rho_{c}') or float('nan'):.2f}" for c in ("realism", "faithfulness", "trust"))
        lead = f"| {PATH_NAMES[row['path']]} | {row['variant']} | {with_interval(row, 'accept', 1, '–')} |"
        if row.get("kid_trust") is None:
            lines.append(f"{lead} – | – | – (no condition kept) | – | {rho} |")
            continue
        lines.append(f"{lead} {_kids(row)} | {_gains(row)} | {rho} |")
    return "\n".join(lines)


def _kids(row: dict) -> str:
    """Two cells: the mean KID of the trust-selected and of the random subsets, each with its 95% interval
    over conditions (:func:`~condeval.trust.evaluate.selection_summary`)."""
    return " | ".join(with_interval(row, key, 3) for key in ("kid_trust", "kid_random"))


def _gains(row: dict) -> str:
    """Two cells: the official code's gain and the ratio of the mean KIDs, each with its 95% interval over
    conditions (:func:`~condeval.trust.evaluate.selection_summary`)."""
    return " | ".join(with_interval(row, key, 1, UNDEFINED_GAIN) for key in ("improvement_official", "improvement"))


def plot_during_generation(steps: pl.DataFrame, path, title: str) -> None:
    """Fig. 4: the KID gain of trust selection and Accept% against the scoring step, one line per
    generator and path (REPA-aligned dotted), each generator's post-generation gain dashed."""
    fig, axes = plt.subplots(1, 2, figsize=(9, 4.2))
    for variant, colour in variant_colours(sorted(steps["variant"].unique().to_list())).items():
        post = steps.filter((pl.col("variant") == variant) & (pl.col("scoring") == "post"))
        for route in ("translator", "aligned"):
            during = steps.filter((pl.col("variant") == variant) & (pl.col("path") == route)).sort("step")
            if during.height == 0:
                continue
            gain, accept = (during[c].cast(pl.Float64).to_numpy() for c in ("improvement", "accept"))  # null: skipped
            style = dict(marker="o", linestyle=":" if route == "aligned" else "-", color=colour)
            label = f"{variant} ({PATH_NAMES[route]})"
            axes[0].plot(during["step"].to_numpy(), gain, label=label, **style)
            axes[1].plot(during["step"].to_numpy(), accept, label=label, **style)
        if post.height and post["improvement"][0] is not None:
            axes[0].axhline(post["improvement"][0], linestyle="--", color=colour, linewidth=1)
    axes[0].set_ylabel("KID improvement over random (%)")
    axes[1].set_ylabel("Accept%")
    scored = sorted(steps.filter(pl.col("scoring") == "during")["step"].unique().to_list())
    for ax in axes:
        ax.set_xlabel("denoising step at which the sample is scored")
        ax.set_xticks(scored)
    # below both panels: inside, the legend hid a post-generation line (CelebA's vanilla at -81%)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(
        handles,
        labels,
        loc="lower center",
        ncol=max(1, len(labels)),
        fontsize=8,
        frameon=False,
        title="dashed: each generator's post-generation gain",
        title_fontsize=7,
    )
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    fig.savefig(path, dpi=150)
    plt.close(fig)


def feature_tables_markdown(correlations: pl.DataFrame, variant: str) -> str:
    """Per generator and arm, the 5 kept features best correlated with the real per-condition means under
    trust; and for ``variant``'s unseen arm (else seen), the 10 unfiltered features with the smallest
    ``|r|`` under random selection (the paper's sanity check)."""
    if correlations.is_empty():
        return "\nNo per-feature correlations: no arm had accepted samples in 3 conditions or more.\n"
    sections = [
        "\nPer-feature correlations run across conditions: an arm whose accepted samples lie in fewer "
        "than 3 conditions has no table, and a feature constant across them has no row.\n"
    ]
    kept = correlations.filter(pl.col("set") == "kept")
    for (name, arm), part in kept.group_by(["variant", "arm"], maintain_order=True):
        top = part.sort("r_trust", descending=True).head(5)
        sections.append(
            f"\nTop-correlated features under trust, {name}, {arm} (kept set, across {part['conditions'][0]} "
            "conditions):\n\n| feature | r (trust) (95% CI) | r (random) | gain |\n|---|---|---|---|\n"
            + "".join(
                f"| `{r['feature']}` | {with_interval(r, 'r_trust', 3)} | {r['r_random']:.3f} | {r['gain']:+.3f} |\n"
                for r in top.iter_rows(named=True)
            )
        )
    mine = correlations.filter((pl.col("set") == "unfiltered") & (pl.col("variant") == variant))
    if mine.is_empty():
        return "".join(sections) + f"\nNo uninformative-feature check: {variant} has no arm with a correlation.\n"
    arm = "unseen" if "unseen" in mine["arm"].to_list() else "seen"
    # uninformative is r near 0 (the paper's bottom ten read 0.000-0.005); r near -1 is a strong correspondence
    bottom = mine.filter(pl.col("arm") == arm).sort(pl.col("r_random").abs()).head(10)
    sections.append(
        f"\nUninformative features (unfiltered set, lowest |r| under random), {variant}, {arm}:\n\n"
        "| feature | r (random) | r (trust) |\n|---|---|---|\n"
        + "".join(
            f"| `{r['feature']}` | {r['r_random']:.3f} | {r['r_trust']:.3f} |\n" for r in bottom.iter_rows(named=True)
        )
    )
    return "".join(sections)

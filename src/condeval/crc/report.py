"""Tables 1–5 and Fig. 1 of the CLIPScore risk-control paper, with word-example panels (Figs. 4–6).

Numbers are percentages as in the paper. A model configured with ``paper: B`` or ``paper: H``
(the paper config) gets the paper's numbers beside ours; rows of other methods are the paper's
citations, labelled as cited.
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
from condeval.crc import paper  # noqa: E402

__all__ = [
    "sweep_markdown",
    "table2_markdown",
    "table4_markdown",
    "table5_markdown",
    "signal_markdown",
    "dropped_rows_markdown",
    "clipped_markdown",
    "plot_violins",
    "plot_word_examples",
    "WORD_COLOURS",
]

#: Word colours of the caption panels (the paper's Figs. 4–6 code the same three outcomes).
WORD_COLOURS = {"tp": "#2ca02c", "fn": "#ff7f0e", "fp": "#d62728", "tn": "#333333"}
_RISK = {"fdr": "FDR", "fpr": "FPR"}


def _pct(value) -> str:
    return "–" if value is None or (isinstance(value, float) and np.isnan(value)) else f"{100 * value:.2f}"


def _estimate(row: dict, key: str) -> str:
    """``row[key]`` in percent with its 95% interval over images when the row has one (``<key>_low`` /
    ``_high``, :func:`condeval.crc.evaluate.bootstrap_intervals`)."""
    low, high = row.get(f"{key}_low"), row.get(f"{key}_high")
    if low is None or high is None or np.isnan(low) or np.isnan(high):
        return _pct(row[key])
    return f"{_pct(row[key])} ({_pct(low)}–{_pct(high)})"


def _paper(value) -> str:
    return "–" if value is None else f"{value:.2f}"


def sweep_markdown(sweep: pl.DataFrame, risk: str, paper_model: str | None = None) -> str:
    """Table 1 (FDR, FOIL-it) or Table 3 (FPR, RichHF-18K): the α sweep, calibration and test columns.

    The α with the best calibration F1 (the one Tables 2 and 4 use) is in bold.
    """
    best = sweep.sort("calibration_f1", "alpha", descending=[True, False])["alpha"][0]
    name = _RISK[risk]
    tests = ["la", "la_set"] if risk == "fdr" else ["precision", "recall", "word_f1"]
    labels = {"la": "LA", "la_set": "LA_set", "precision": "PREC", "recall": "REC", "word_f1": "word F1"}
    reference = (paper.TABLE1_B if risk == "fdr" else paper.TABLE3_B) if paper_model == "B" else {}
    rows = []
    for r in sweep.sort("alpha").iter_rows(named=True):
        mark = "**" if r["alpha"] == best else ""
        row = {
            "α": f"{mark}{100 * r['alpha']:g}%{mark}",
            "λ̂": f"{r['lambda_hat']:.4f}",
            f"cal. {name}": _pct(r["calibration_risk"]),
            "cal. F1": _pct(r["calibration_f1"]),
            f"test {name}": _estimate(r, "test_risk"),
            "test AP": _estimate(r, "test_ap"),
            "test F1": _estimate(r, "test_f1"),
            **{f"test {labels[k]}": _estimate(r, f"test_{k}") for k in tests},
            "words flagged / caption": f"{r['test_set_size']:.2f}",
        }
        cited = reference.get(round(r["alpha"], 2))
        if cited:
            row |= {f"paper test {name}": _paper(cited["test_risk"]), "paper test F1": _paper(cited["test_f1"])}
        rows.append(row)
    return markdown_table(pl.DataFrame(rows)) + _sweep_footer(sweep)


def _sweep_footer(sweep: pl.DataFrame) -> str:
    """What the sets could not see: the calibration units, refused captions and never-scored words."""
    first = sweep.row(0, named=True)
    unit = first.get("unit", "caption")
    return (
        f"\nCalibrated on {first['n_calibration']} captions, n = {first.get('n_units', first['n_calibration'])} {unit}s. "
        f"Refused (a valid word past the tokenizer's max_length): {first.get('n_refused_truncated', 0)} captions. "
        f"Never scored (not a valid POS, risk not counted there): {_pct(first.get('test_unscored_words'))}% of test words, "
        f"{_pct(first.get('test_unscored_errors'))}% of test errors.\n"
    )


def _label(model: str, labels: dict[str, str]) -> str:
    return labels.get(model, model)


def table2_markdown(selected: dict[str, pl.DataFrame], labels: dict[str, str], paper_models: dict[str, str]) -> str:
    """Table 2: FDR, AP and LA on FOIL-it and FOIL-nocaps (overall, in, near, out) at the selected α.

    ``selected`` maps a model to its FOIL-it ``selected.parquet`` rows; the paper's rows follow.
    """
    groups = [
        ("foil_it", "overall", "FOIL-it"),
        ("foil_nocaps", "overall", "nocaps overall"),
        ("foil_nocaps", "in", "in"),
        ("foil_nocaps", "near", "near"),
        ("foil_nocaps", "out", "out"),
    ]
    rows = []
    for model, frame in selected.items():
        row = {"model": f"ours, {_label(model, labels)} (α = {100 * frame['alpha'][0]:g}%)"}
        for benchmark, domain, title in groups:
            hit = frame.filter((pl.col("benchmark") == benchmark) & (pl.col("domain") == domain))
            for metric, name in (("risk", "FDR"), ("ap", "AP"), ("la", "LA")):
                row[f"{title} {name}"] = _estimate(hit.row(0, named=True), metric) if len(hit) else "–"
        rows.append(row)
    keys = {"foil_it": "FOIL-it", "overall": "nocaps overall", "in": "in", "near": "near", "out": "out"}
    for method, entry in paper.TABLE2.items():
        if not entry["cited"] and method not in paper_models.values():
            continue
        name = f"{method} (cited)" if entry["cited"] else f"paper: ours, {paper.PAPER_MODELS[method]}"
        row = {"model": name}
        for group, title in keys.items():
            for metric, label in (("risk", "FDR"), ("ap", "AP"), ("la", "LA")):
                row[f"{title} {label}"] = _paper(entry[group][metric])
        rows.append(row)
    return markdown_table(pl.DataFrame(rows)) + _refused_footer(selected, labels)


def table4_markdown(selected: dict[str, pl.DataFrame], labels: dict[str, str], paper_models: dict[str, str]) -> str:
    """Table 4: word precision, recall and F1 on RichHF-18K's test split at the selected α."""
    rows = []
    for model, frame in selected.items():
        hit = frame.filter(pl.col("domain") == "overall").row(0, named=True)
        rows.append(
            {
                "model": f"ours, {_label(model, labels)} (α = {100 * frame['alpha'][0]:g}%)",
                "ft.": "",
                "PREC": _estimate(hit, "precision"),
                "REC": _estimate(hit, "recall"),
                "F1": _estimate(hit, "word_f1"),
                "FPR": _estimate(hit, "risk"),
            }
        )
    for method, entry in paper.TABLE4.items():
        if not entry["cited"] and method not in paper_models.values():
            continue
        name = f"{method} (cited)" if entry["cited"] else f"paper: ours, {paper.PAPER_MODELS[method]}"
        rows.append(
            {
                "model": name,
                "ft.": "✓" if entry["fine_tuned"] else "",
                "PREC": _paper(entry["precision"]),
                "REC": _paper(entry["recall"]),
                "F1": _paper(entry["word_f1"]),
                "FPR": "–",
            }
        )
    return markdown_table(pl.DataFrame(rows)) + _refused_footer(selected, labels)


def _refused_footer(selected: dict[str, pl.DataFrame], labels: dict[str, str]) -> str:
    """Per model and benchmark, the test captions left out for a valid word past the tokenizer's max_length."""
    counts = [
        f"{_label(model, labels)} on {benchmark}: {count}"
        for model, frame in selected.items()
        if "n_refused_truncated" in frame.columns
        for benchmark, count in frame.select("benchmark", "n_refused_truncated").unique(maintain_order=True).iter_rows()
    ]
    return (
        f"\nCaptions refused (a valid word past the tokenizer's max_length): {'; '.join(counts)}.\n" if counts else ""
    )


def table5_markdown(tables: dict[str, pl.DataFrame], labels: dict[str, str], paper_models: dict[str, str]) -> str:
    """Table 5: UPS and τ_c before (PRE) and after (POS) calibration, one row per model and stage, each
    with its 95% interval over images, and the POS − PRE change on the same draws."""
    datasets = list(dict.fromkeys(name for frame in tables.values() for name in frame["dataset"]))
    rows = []
    for model, frame in tables.items():
        for stage in ("pre", "pos"):
            part = frame.filter(pl.col("stage") == stage)
            scale = part["lambda"][0]
            setting = "no λ controls the risk" if np.isnan(scale) else f"λ = {scale:g}"
            rows.append(_table5_row(f"{_label(model, labels)}-{stage.upper()} ({setting})", part, datasets, ""))
        pos = frame.filter(pl.col("stage") == "pos")
        rows.append(_table5_row(f"{_label(model, labels)}: POS − PRE", pos, datasets, "_change"))
        code = paper_models.get(model)
        for stage in ("pre", "pos") if code else ():
            cited = paper.TABLE5[(code, stage)]
            row = {"method": f"paper: {code}-{stage.upper()}"}
            for name in datasets:
                entry = cited.get(name, {"ups": None, "tau_c": None})
                row |= {f"{name} UPS": _paper(entry["ups"]), f"{name} τ_c": _paper(entry["tau_c"])}
            rows.append(row)
    return markdown_table(pl.DataFrame(rows))


def _table5_row(method: str, part: pl.DataFrame, datasets: list[str], suffix: str) -> dict[str, str]:
    """One Table 5 row: per dataset, ``ups<suffix>`` and ``tau_c<suffix>`` with their intervals."""
    row = {"method": method}
    for name in datasets:
        hit = part.filter(pl.col("dataset") == name).row(0, named=True)
        row |= {f"{name} UPS": _estimate(hit, f"ups{suffix}"), f"{name} τ_c": _estimate(hit, f"tau_c{suffix}")}
    return row


def signal_markdown(signals: dict[tuple[str, str], dict]) -> str:
    """Does the CLIP find the wrong words? AP and LA (top word), each with its 95% interval over images,
    beside chance, per model and benchmark."""
    rows = [
        {
            "model": model,
            "benchmark": benchmark,
            "test captions": s["n_captions"],
            "with an error": s["n_with_error"],
            "AP": _estimate(s, "ap"),
            "AP by chance": _pct(s["ap_chance"]),
            "LA (top word)": _estimate(s, "la"),
            "LA, random valid word": _pct(s["la_chance"]),
            "LA, random noun": _pct(s["la_noun_chance"]),
        }
        for (model, benchmark), s in signals.items()
    ]
    return markdown_table(pl.DataFrame(rows))


def dropped_rows_markdown(dropped: dict[str, dict[str, dict[str, int]]]) -> str:
    """Rows the loaders dropped on purpose, one row per benchmark, file and reason.

    ``dropped`` maps a benchmark to its :meth:`condeval.datasets.DroppedRows.as_dict` (file →
    reason → rows); a file read whole gets one row with reason "none" and 0 rows, so the table
    lists every file each benchmark read.
    """
    rows = [
        {"benchmark": benchmark, "file": file, "reason": reason, "rows": n}
        for benchmark, files in dropped.items()
        for file, reasons in files.items()
        for reason, n in (reasons.items() if reasons else [("none", 0)])
    ]
    return markdown_table(
        pl.DataFrame(rows, schema={"benchmark": pl.String, "file": pl.String, "reason": pl.String, "rows": pl.Int64})
    )


def clipped_markdown(table: pl.DataFrame, labels: dict[str, str]) -> str:
    """The share of CLIPScores clipped at 0, per benchmark and model (:func:`condeval.crc.evaluate.clipped_table`), in %,
    each with its 95% interval over the images in parentheses."""
    rows = [
        {
            "benchmark": row["benchmark"],
            "model": _label(row["model"], labels) if row["model"] else "–",
            "pairs": row["pairs"],
            "masked samples at 0 (%)": _estimate(row, "masked_clipped"),
            "unmasked pairs at 0 (%)": _estimate(row, "unmasked_clipped"),
        }
        for row in table.iter_rows(named=True)
    ]
    return markdown_table(pl.DataFrame(rows))


def plot_violins(pairs: pl.DataFrame, seed: int, title: str):
    """Fig. 1: the masked-CLIPScore distributions of a random pair and of the highest- and lowest-variance pairs.

    ``pairs`` has ``samples`` (the I×T scores), ``std``, ``clipscore``, ``words`` and ``human_score``.
    The three are drawn among the pairs none of whose scores CLIPScore clipped at 0 (all pairs if
    every one has a clipped score): a clipped pair's spread is the clip's, and the lowest-variance pick
    would otherwise be a pair scored 0 throughout.
    """
    indexed = pairs.with_row_index("row")
    unclipped = indexed.filter(pl.col("samples").list.min() > 0)
    candidates = unclipped if unclipped.height else indexed
    random_row = int(candidates["row"][int(np.random.default_rng(seed).integers(candidates.height))])
    order = candidates.sort("std")
    chosen = [
        ("random pair", random_row),
        ("highest variance", int(order["row"][-1])),
        ("lowest variance", int(order["row"][0])),
    ]
    fig, ax = plt.subplots(figsize=(9, 4.2))
    data = [np.asarray(pairs["samples"][row], dtype=float) for _, row in chosen]
    parts = ax.violinplot(data, showmedians=True, showextrema=True)
    for body in parts["bodies"]:
        body.set_alpha(0.5)
    for k, (_, row) in enumerate(chosen, start=1):
        ax.scatter(
            [k],
            [pairs["clipscore"][row]],
            marker="D",
            color="black",
            zorder=3,
            label="unmasked CLIPScore" if k == 1 else None,
        )
    ticks = [
        f'{name}\n"{textwrap.shorten(" ".join(pairs["words"][row]), 38)}"\nhuman {pairs["human_score"][row]:.2f}'
        for name, row in chosen
    ]
    ax.set_xticks(range(1, 4), ticks, fontsize=8)
    ax.set_ylabel("CLIPScore")
    ax.set_title(title)
    ax.legend(loc="best", fontsize=8, title="bars: median and extrema", title_fontsize=7)
    fig.tight_layout()
    return fig


def _outcome(flagged: bool, error: bool) -> str:
    return {(True, True): "tp", (False, True): "fn", (True, False): "fp", (False, False): "tn"}[(flagged, error)]


def plot_word_examples(examples: pl.DataFrame, title: str):
    """Caption panels: each example's image and its words coloured by outcome at its ``threshold`` (λ̂).

    ``examples`` has ``path``, ``words``, ``word_scores`` (f_v, printed under the words that were
    ever masked), ``labels`` and ``threshold``.

    Green: a wrong word flagged (true positive); orange: a wrong word missed (false negative); red:
    a right word flagged (false positive); dark: a right word left alone.
    """
    n = len(examples)
    fig, axes = plt.subplots(n, 2, figsize=(9, 1.45 * n), gridspec_kw={"width_ratios": [1, 5]}, squeeze=False)
    for (image_ax, text_ax), row in zip(axes, examples.iter_rows(named=True)):
        with Image.open(row["path"]) as image:
            image_ax.imshow(image.convert("RGB"))
        image_ax.axis("off")
        text_ax.axis("off")
        previous = None
        for word, score, label in zip(row["words"], row["word_scores"], row["labels"]):
            colour = WORD_COLOURS[_outcome(score > row["threshold"], bool(label))]
            style = {
                "color": colour,
                "fontsize": 10,
                "fontweight": "normal" if colour == WORD_COLOURS["tn"] else "bold",
            }
            # Each word is placed against the previous one, so the line survives any re-layout.
            if previous is None:
                previous = text_ax.text(0.0, 0.55, word, transform=text_ax.transAxes, va="baseline", **style)
            else:
                previous = text_ax.annotate(
                    word, xy=(1, 0), xycoords=previous, xytext=(4, 0), textcoords="offset points", va="bottom", **style
                )
            if score > 0:  # never-masked words (not a valid POS) have no score
                text_ax.annotate(
                    f"{score:.2f}",
                    xy=(0.5, 0),
                    xycoords=previous,
                    xytext=(0, -4),
                    textcoords="offset points",
                    ha="center",
                    va="top",
                    fontsize=6,
                    color="#777777",
                )
    handles = [
        plt.Line2D([], [], color=c, marker="s", linestyle="", label=name)
        for name, c in (
            ("true positive", WORD_COLOURS["tp"]),
            ("false negative", WORD_COLOURS["fn"]),
            ("false positive", WORD_COLOURS["fp"]),
        )
    ]
    fig.suptitle(title, fontsize=10)
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.04, 1, 0.97))
    return fig

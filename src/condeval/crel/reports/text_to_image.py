"""Fig. 12 of the text-to-image track (Section 4.3): per test caption, each model's image and its worst case.

Table 3, Fig. 11, Fig. 7 and the cards share image-to-text's drawing code
(:mod:`condeval.crel.reports.image_to_text`), which knows the DINO-SIM label.
"""

from __future__ import annotations

import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from PIL import Image  # noqa: E402

from condeval.crel.reports.image_to_text import METRIC_LABELS  # noqa: E402

__all__ = ["plot_t2i_examples"]


def plot_t2i_examples(examples: list[dict], alpha: float, path) -> None:
    """Fig. 12: per example caption, the real image, then per model its image (ρ and rank) and the real
    val image nearest its decoded worst case (CReL-ρ and rank).

    ``examples``: :func:`condeval.crel.reports.examples.fig12_examples`.
    """
    n_models = max(len(e["models"]) for e in examples)
    fig, axes = plt.subplots(
        len(examples), 1 + 2 * n_models, figsize=(1.6 * (1 + 2 * n_models), 2.2 * len(examples)), squeeze=False
    )
    for row, example in zip(axes, examples):
        _image(row[0], example["image_path"], "\n".join(textwrap.wrap(example["reference"], 24)), fontsize=6)
        row[0].set_ylabel(f"CReL-{METRIC_LABELS[example['metric']]}", fontsize=7)
        for k, m in enumerate(example["models"]):
            _image(row[1 + 2 * k], m["image"], f"{m['model']}\nρ={m['rho']:.3f}$^{{{m['rank_rho']}}}$")
            _image(row[2 + 2 * k], m["worst_image"], f"worst case ≈\nCReL-ρ={m['crel_rho']:.3f}$^{{{m['rank_crel']}}}$")
    fig.suptitle(
        f"Qualitative results of text-to-image models (α = {alpha:g}); superscripts: rank on this caption", fontsize=9
    )
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


def _image(ax, path, title: str, fontsize: float = 6.5) -> None:
    ax.imshow(Image.open(path).convert("RGB"))
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title, fontsize=fontsize)

"""The CLIPScore risk-control paper's reported numbers (percent), one copy, for the reports.

Keys follow the columns of :mod:`condeval.crc.evaluate`. ``B`` and ``H`` are the paper's
multilingual LAION CLIP ViT-B/32 and ViT-H/14; rows of other methods are cited by the paper.
"""

from __future__ import annotations

__all__ = ["TABLE1_B", "TABLE2", "TABLE3_B", "TABLE4", "TABLE5", "PAPER_MODELS"]

PAPER_MODELS = {"B": "ML LAION ViT-B/32", "H": "ML LAION ViT-H/14"}

_T1_COLUMNS = ("calibration_risk", "calibration_f1", "test_risk", "test_ap", "test_f1", "test_la", "test_la_set")
#: Table 1: FOIL-it, FDR controlled, ViT-B/32; per α.
TABLE1_B = {
    alpha: dict(zip(_T1_COLUMNS, values))
    for alpha, values in {
        0.10: (9.69, 61.74, 10.10, 60.75, 61.93, 33.68, 34.39),
        0.15: (14.62, 63.12, 15.02, 60.34, 63.31, 37.33, 38.53),
        0.20: (19.58, 63.55, 20.20, 59.68, 63.76, 40.15, 41.92),
        0.25: (24.55, 63.21, 25.13, 58.92, 63.56, 42.33, 44.69),
        0.30: (29.52, 62.77, 30.24, 58.04, 62.81, 44.07, 47.06),
        0.35: (34.50, 61.90, 35.25, 57.24, 61.81, 45.60, 49.31),
        0.40: (39.49, 60.65, 40.16, 56.44, 60.49, 46.82, 51.18),
        0.45: (44.48, 58.86, 45.11, 55.58, 58.76, 47.88, 53.11),
        0.50: (49.47, 56.72, 50.27, 54.71, 56.68, 48.81, 54.88),
    }.items()
}

_T3_COLUMNS = (
    "calibration_risk",
    "calibration_f1",
    "test_risk",
    "test_ap",
    "test_f1",
    "test_precision",
    "test_recall",
    "test_word_f1",
)
#: Table 3: RichHF-18K, FPR controlled, ViT-B/32; per α.
TABLE3_B = {
    alpha: dict(zip(_T3_COLUMNS, values))
    for alpha, values in {
        0.10: (8.09, 56.87, 7.13, 78.22, 52.95, 21.03, 39.29, 27.40),
        0.15: (12.65, 59.68, 10.74, 79.29, 58.97, 26.14, 43.76, 32.73),
        0.20: (17.41, 61.40, 16.92, 80.73, 65.42, 30.43, 50.49, 37.97),
        0.25: (22.16, 61.24, 24.03, 80.44, 66.02, 31.02, 56.80, 40.12),
        0.30: (27.02, 58.75, 31.42, 80.41, 66.76, 31.22, 62.55, 41.65),
        0.35: (31.85, 56.66, 36.84, 80.06, 66.40, 31.15, 66.47, 42.42),
        0.40: (36.74, 56.30, 40.04, 79.48, 65.28, 31.76, 69.41, 43.58),
        0.45: (41.75, 55.07, 45.02, 78.95, 64.15, 31.84, 72.86, 44.32),
        0.50: (46.67, 54.17, 48.64, 78.25, 62.37, 31.80, 76.00, 44.84),
    }.items()
}

_T2_GROUPS = ("foil_it", "overall", "in", "near", "out")
_T2_METRICS = ("risk", "ap", "la")


def _t2(values: tuple) -> dict[str, dict[str, float | None]]:
    """Table 2's 15 numbers (FOIL-it, then FOIL-nocaps overall/in/near/out; FDR, AP, LA each)."""
    return {group: dict(zip(_T2_METRICS, values[3 * k : 3 * k + 3])) for k, group in enumerate(_T2_GROUPS)}


#: Table 2: FOIL-it and FOIL-nocaps by domain (FDR "None" where a method has none).
TABLE2 = {
    "CHAIR (Rohrbach et al., 2018)": {
        "cited": True,
        **_t2((None, 92.5, 79.0, None, 58.3, 14.4, None, 57.8, 13.5, None, 59.1, 17.6, None, 58.1, 12.2)),
    },
    "ALOHa (Petryk et al., 2024)": {
        "cited": True,
        **_t2((None, 61.4, 40.0, None, 69.5, 45.2, None, 71.8, 47.4, None, 66.7, 47.3, None, 70.9, 48.8)),
    },
    "GAE_B (Nam et al., 2024)": {
        "cited": True,
        **_t2((None, 71.4, 73.2, None, 69.0, 60.3, None, 67.3, 54.7, None, 68.4, 59.7, None, 71.3, 63.2)),
    },
    "GAE_H (Nam et al., 2024)": {
        "cited": True,
        **_t2((None, 80.6, 83.6, None, 79.4, 71.6, None, 78.9, 66.1, None, 79.3, 70.8, None, 80.2, 74.8)),
    },
    "B": {
        "cited": False,
        **_t2((20.2, 59.7, 40.2, 18.6, 64.4, 54.9, 20.4, 70.0, 53.5, 19.6, 72.2, 56.3, 16.2, 74.4, 52.6)),
    },
    "H": {
        "cited": False,
        **_t2((19.8, 63.4, 51.4, 19.1, 65.7, 60.3, 19.2, 70.4, 56.7, 19.4, 72.5, 63.0, 18.5, 74.0, 56.2)),
    },
}

#: Table 4: RichHF-18K word precision, recall, F1 ("ft." marks fine-tuned methods). The paper prints the cited
#: rows' F1 under PREC and their precision under F1: each printed "PREC" is the harmonic mean of the other two
#: (ALOHa: 2 · 38.5 · 31.1 / 69.6 = 34.4), while its own rows read PREC, REC, F1. Stored by meaning.
TABLE4 = {
    "ALOHa (Petryk et al., 2024)": {
        "cited": True,
        "fine_tuned": False,
        "precision": 38.5,
        "recall": 31.1,
        "word_f1": 34.4,
    },
    "Rich-HF (MH) (Liang et al., 2024)": {
        "cited": True,
        "fine_tuned": True,
        "precision": 33.0,
        "recall": 62.9,
        "word_f1": 43.3,
    },
    "Rich-HF (AP) (Liang et al., 2024)": {
        "cited": True,
        "fine_tuned": True,
        "precision": 34.1,
        "recall": 61.3,
        "word_f1": 43.9,
    },
    "GAE_B (Nam et al., 2024)": {
        "cited": True,
        "fine_tuned": False,
        "precision": 50.4,
        "recall": 32.8,
        "word_f1": 39.8,
    },
    "GAE_H (Nam et al., 2024)": {
        "cited": True,
        "fine_tuned": False,
        "precision": 51.6,
        "recall": 36.5,
        "word_f1": 42.7,
    },
    "B": {"cited": False, "fine_tuned": False, "precision": 31.2, "recall": 62.6, "word_f1": 41.7},
    "H": {"cited": False, "fine_tuned": False, "precision": 32.0, "recall": 64.2, "word_f1": 42.7},
}

#: Table 5: UPS and τ_c before (pre) and after (pos) interval calibration, per model and dataset.
TABLE5 = {
    (model, stage): {
        dataset: {"ups": ups, "tau_c": tau}
        for dataset, (ups, tau) in zip(("vicr", "polaris", "flickr8k", "composite"), pairs)
    }
    for (model, stage), pairs in {
        ("B", "pre"): ((22.1, 63.1), (38.1, 50.1), (2.8, 53.1), (18.3, 47.2)),
        ("B", "pos"): ((36.4, 61.5), (44.1, 49.4), (13.4, 51.9), (26.1, 46.9)),
        ("H", "pre"): ((42.6, 67.8), (60.2, 51.0), (24.0, 56.9), (18.3, 54.6)),
        ("H", "pos"): ((49.6, 66.4), (70.1, 50.6), (23.1, 55.8), (27.1, 53.6)),
    }.items()
}

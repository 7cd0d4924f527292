"""Fig. 4's examples are assembled by name: each model's own caption, scores, ranks and worst case in words."""

import numpy as np
import polars as pl
import pytest
import torch

from condeval.crel.reports.examples import fig4_examples


class IdentityDecoder:
    """A stand-in calibrated CReL whose decoder returns the latent point itself."""

    def decode_torch(self, z, x=None):
        return torch.as_tensor(z, dtype=torch.float64)


def _inputs():
    models, ids = ["b-model", "a-model"], [10, 20]
    scores = pl.DataFrame(
        {
            "metric": ["clip"] * 4,
            "model": ["b-model", "b-model", "a-model", "a-model"],
            "image_id": [10, 20, 10, 20],
            "rho": [0.9, 0.5, 0.8, 0.6],
            "crel_rho": [0.1, 0.5, 0.7, 0.6],  # image 10: the ranking flips, so it is the example
            "z_worst": [[0.0, 1.0], [1.0, 0.0], [1.0, 0.0], [0.0, 1.0]],
        }
    )
    generated = pl.DataFrame(
        {
            "model": ["a-model", "a-model", "b-model", "b-model"],
            "image_id": [20, 10, 20, 10],
            "caption": ["a20", "a10", "b20", "b10"],
        }
    )
    references = pl.DataFrame({"image_id": ids, "caption": ["a red star", "a blue ring"], "path": ["10.png", "20.png"]})
    galleries = {"clip": (np.array(ids), np.array([[1.0, 0.0], [0.0, 1.0]]))}
    crels = {(model, "clip"): IdentityDecoder() for model in models}
    return scores, crels, generated, references, galleries


def test_each_model_gets_its_own_caption_ranks_and_nearest_worst_case():
    scores, crels, generated, references, galleries = _inputs()
    (example,) = fig4_examples(scores, crels, generated, references, galleries, n_examples=1)
    assert example["image_path"] == "10.png" and example["reference"] == "a red star"
    b, a = example["models"]
    assert (b["model"], b["caption"], b["rank_rho"], b["rank_crel"]) == ("b-model", "b10", 1, 2)
    assert (a["model"], a["caption"], a["rank_rho"], a["rank_crel"]) == ("a-model", "a10", 2, 1)
    assert (
        b["worst_caption"] == "a blue ring" and a["worst_caption"] == "a red star"
    )  # Dec(z_worst) nearest real caption


def test_a_missing_caption_names_the_model_and_image():
    scores, crels, generated, references, galleries = _inputs()
    with pytest.raises(KeyError, match="a-model.*image 10"):
        fig4_examples(scores, crels, generated.filter(pl.col("caption") != "a10"), references, galleries, n_examples=1)

"""Snakemake adapter: Fig. 5 — reconstruction regions of VAE and CVAE for samples of Y | X = x."""

import numpy as np
import torch

from condeval.core.io import atomic_path, read_matrix, read_npz, read_parquet
from condeval.core.logs import log_to_file
from condeval.crel.folds import load_fold
from condeval.crel.models.vae import LatentVAE
from condeval.crel.reports.synthetic import plot_vae_vs_cvae
from condeval.crel.synthetic import Preprocessor, SyntheticParams, sample_conditional

log = log_to_file(snakemake.log[0])
p = snakemake.params
raw = read_npz(snakemake.input.params, required=["A", "B", "sigma", "kind"])
params = SyntheticParams(kind=str(raw["kind"]), A=raw["A"], B=raw["B"], sigma=float(raw["sigma"]))
# Refit the preprocessing exactly as rule preprocess did (same rows, deterministic), rather than
# restoring a scaler from stored statistics.
splits = read_parquet(snakemake.input.splits, columns=["fold"])
lgm = (splits["fold"] == "lgm").to_numpy()
X_raw = read_matrix(snakemake.input.data, "x", width=p.p)
pre = Preprocessor().fit(X_raw[lgm], read_matrix(snakemake.input.data, "y", width=p.d)[lgm])
x = load_fold(snakemake.input.processed, "test").X[p.condition]
x_unit = pre.model_to_unit_x(x[None, :])
y = pre.transform_y(sample_conditional(x_unit, p.n_samples, params, np.random.default_rng(p.seed))[0])
panels = {}
with torch.no_grad():
    for name, path in (("CVAE", snakemake.input.cvae), ("VAE", snakemake.input.vae)):
        model = LatentVAE.load_from_checkpoint(path, map_location="cpu", weights_only=True).eval()
        yt = torch.as_tensor(y, dtype=torch.float32)
        xt = (
            torch.as_tensor(np.repeat(x[None, :], len(y), axis=0), dtype=torch.float32)
            if model.hparams.cond_dim
            else None
        )
        z = model.encode(yt, xt)
        panels[name] = {"z": z.numpy(), "y": y, "y_rec": model.decode(z, xt).numpy()}
        log.info("%s reconstruction MSE on Y|x samples: %.5f", name, float(np.mean((panels[name]["y_rec"] - y) ** 2)))
with atomic_path(snakemake.output.png) as tmp:
    plot_vae_vs_cvae(panels, tmp)

"""Snakemake adapter: latent codes E(y) of every row with the trained VAE."""
import polars as pl
import torch

from condeval.io import matrix_columns, read_matrix, read_parquet, write_parquet
from condeval.logs import log_to_file
from condeval.models.vae import LatentVAE

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
vae = LatentVAE.load_from_checkpoint(snakemake.input.model, map_location="cpu").eval()
rows = read_parquet(snakemake.input.processed, columns=["row"])["row"].to_numpy()
Y = read_matrix(snakemake.input.processed, "y")
with torch.no_grad():
    Z = vae.encode(torch.as_tensor(Y, dtype=torch.float32)).double().numpy()
write_parquet(pl.DataFrame({"row": rows, **matrix_columns("z", Z)}), snakemake.output.latents)
log.info("encoded %d rows into r=%d", Z.shape[0], Z.shape[1])
